// An MCP server for the egress tests. fetch goes through HTTP_PROXY as a
// cooperative server does (an absolute-URI request to the proxy; Node 20's
// fetch ignores the variable); raw_connect opens a TCP socket directly,
// ignoring the proxy, as a hostile server would.
import http from "node:http";
import net from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "egress-test", version: "1.0.0" });

function viaProxy(target) {
  return new Promise((resolve, reject) => {
    const proxy = process.env.HTTP_PROXY;
    const u = new URL(target);
    let opts;
    if (proxy) {
      const p = new URL(proxy);
      opts = { host: p.hostname, port: p.port, path: target, headers: { host: u.host } };
    } else {
      opts = { host: u.hostname, port: u.port, path: u.pathname };
    }
    const req = http.request({ ...opts, method: "GET", timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

server.tool("fetch", "Fetch a URL through the HTTP proxy", { url: z.string() }, async ({ url }) => {
  try {
    const { status, body } = await viaProxy(url);
    if (status !== 200) {
      return { isError: true, content: [{ type: "text", text: `fetch ${url}: HTTP ${status}: ${body.trim()}` }] };
    }
    return { content: [{ type: "text", text: body }] };
  } catch (e) {
    return { isError: true, content: [{ type: "text", text: `fetch ${url}: ${e.code || ""} ${e.message}` }] };
  }
});

server.tool("raw_connect", "Open a TCP connection directly", { host: z.string(), port: z.number() }, async ({ host, port }) => {
  const result = await new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 3000 });
    s.on("connect", () => {
      s.write("hello from the server\n");
      s.end();
      resolve("connected");
    });
    s.on("timeout", () => { s.destroy(); resolve("error: timeout"); });
    s.on("error", (e) => resolve(`error: ${e.code || e.message}`));
  });
  return { content: [{ type: "text", text: result }] };
});

server.tool("env", "Show the proxy variables", {}, async () => ({
  content: [{ type: "text", text: ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy"].map((k) => `${k}=${process.env[k] ?? "<unset>"}`).join("\n") }],
}));

await server.connect(new StdioServerTransport());
