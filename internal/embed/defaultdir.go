package embed

import "github.com/toolgate/toolgate/internal/model"

// ModelDirEnv names the environment variable that points at the model
// folder.
const ModelDirEnv = model.DirEnv

// DefaultDir locates the installed model folder: $TOOLGATE_MODEL_DIR when
// set, else the user cache folder `toolgate model install` fills, else the
// checkout's .cache/models/all-MiniLM-L6-v2 (see [model.Find]). The error
// says to run `toolgate model install`.
func DefaultDir() (string, error) {
	loc, err := model.Find()
	if err != nil {
		return "", err
	}
	return loc.Dir, nil
}

const (
	weightsFile   = model.WeightsFile
	tokenizerFile = "tokenizer.json"
	configFile    = "config.json"
)
