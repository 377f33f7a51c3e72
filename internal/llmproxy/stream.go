package llmproxy

import (
	"context"
	"io"
	"net/http"
)

func (p *Proxy) stream(ctx context.Context, w http.ResponseWriter, body io.Reader, provider, api string, info *requestInfo) {
	relay(w, body)
}
