// Package modelserver is a scripted model server: one HTTP server that speaks
// the four wire APIs the supported coding agents use, so the agents can run
// end to end with no model provider. Tests and demos start it on loopback,
// point an agent's base URL at it, and assert on what the agent did and on
// the requests it sent.
//
// # API (stable)
//
//	srv, err := modelserver.Start(modelserver.Options{Script: s}, "127.0.0.1:0")
//	defer srv.Close()
//	srv.URL()      // http://127.0.0.1:PORT
//	srv.Requests() // every request so far, secrets redacted
//	srv.WriteRequests(w) // the same as JSON lines
//
// Options.WorkDir resolves relative paths when the request does not reveal
// the agent's working directory; Options.OnRequest sees each request once
// answered.
//
// New returns the same server as an http.Handler without listening.
// LoadScript reads a JSON script file. `cto-harness modelserver --script FILE`
// runs it standalone and prints its URL.
//
// # Endpoints and base URLs
//
//	qwen-code    POST /v1/chat/completions   base URL srv.URL()+"/v1"
//	codex        POST /v1/responses          base URL srv.URL()+"/v1"
//	claude-code  POST /v1/messages?beta=true base URL srv.URL()
//	gemini-cli   POST /v1beta/models/M:streamGenerateContent?alt=sse
//	                                         base URL srv.URL()
//
// Streaming (SSE) and non-streaming answers are both served. Other endpoints
// get the smallest valid answer: GET …/models a one-model listing,
// …/count_tokens and …:countTokens an estimate, anything else {}.
//
// # Scripts
//
// A Script is an ordered list of turns; each turn is one Action: write a file
// (path, content), run a shell command, leak the key (write the API key the
// request carried — Authorization Bearer, x-api-key, x-goog-api-key or ?key= —
// to path), answer with text, or fail with an HTTP status and body. Writing
// outside the allowed paths is a write with a path the test chooses. A tool
// turn may carry Text, sent as assistant text before the tool call.
//
// Turn selection is stateless: the turn played is the number of tool results
// already in the conversation, so retries replay the same turn. A request that
// offers no tools (a title, summary or next-speaker side request) is answered
// with DefaultFinalText and does not advance the script; gemini-cli's JSON
// side requests (responseMimeType application/json) get an object that fits
// their schema. Past the last turn the model answers DefaultFinalText.
//
// The abstract action is mapped onto the tool the agent offers in the
// request: write onto write_file{file_path,content} (qwen-code, gemini-cli),
// Write{file_path,content} (claude-code) or apply_patch (codex, an "*** Add
// File" patch; each line gets a trailing newline, so give content ending in
// one); shell onto run_shell_command{command} (qwen-code, gemini-cli),
// Bash{command} (claude-code) or exec_command{cmd} / shell{command:[…]}
// (codex). Unknown agents are matched by argument names. When the agent
// offers no write tool (codex with a model it has no metadata for) or the
// file is empty (apply_patch cannot add one), the write goes through the
// shell tool as printf '%s' CONTENT > PATH. When no tool fits at all, the
// model answers with a text saying so, naming the tools offered. What each
// pinned agent sends, and its quirks, is in docs/agents.md.
//
// # Paths
//
// A relative script path is resolved against the working directory the agent
// states in its request (qwen-code: "I'm currently working in the directory:
// DIR"; gemini-cli: the first of its "Workspace Directories"; claude-code:
// "Primary working directory: DIR"; codex: <cwd>DIR</cwd>), else against Options.WorkDir; an absolute path is used as
// given. Agents require absolute paths for their write tools.
//
// # Usage
//
// Every answer reports UsageInput prompt tokens (UsageCached of them cached)
// and UsageOutput completion tokens, in each API's own usage fields
// (Anthropic's input_tokens excludes the cached part).
//
// # Recording
//
// Requests returns method, path, query, headers and body of each request,
// with the API it spoke, the script turn it played (-1 for none) and the
// status answered. Authorization, x-api-key, x-goog-api-key and the key
// query parameter are replaced by Redacted, and the key's value is removed
// from bodies (after a leak turn the history carries it).
//
// The end-to-end tests run the real pinned agents from
// $XDG_CACHE_HOME/cto-harness/agents/NAME/VERSION and only when
// CTO_HARNESS_AGENT_TESTS=1 (=require fails when an agent is missing);
// CTO_HARNESS_UPDATE_STREAMS=1 rewrites testdata/streams/AGENT-SCENARIO.jsonl,
// each agent's native stream-json with {{WORK}}, {{OUTSIDE}}, {{ROOT}},
// {{URL}}, {{KEY}} and {{WORK_DASHED}} (the work path with dashes for slashes) placeholders.
package modelserver
