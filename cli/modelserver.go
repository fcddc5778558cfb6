package cli

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cto-harness/cto-harness/harness/agent/modelserver"
)

// ModelServerCmd is `cto-harness modelserver`: the scripted model server run
// standalone, for demos and for trying an agent by hand.
type ModelServerCmd struct {
	Listen   string        `name:"listen" default:"127.0.0.1:0" help:"Address to listen on (port 0 picks a free port)." placeholder:"HOST:PORT"`
	Script   string        `name:"script" required:"" type:"existingfile" help:"JSON script: {\"turns\":[{\"action\":\"write\",\"path\":\"hello.txt\",\"content\":\"hi\\n\"},{\"action\":\"text\",\"text\":\"done\"}]}." placeholder:"FILE"`
	WorkDir  string        `name:"workdir" type:"path" help:"Directory that resolves relative script paths when a request does not reveal the agent's working directory." placeholder:"DIR"`
	Log      bool          `name:"log" help:"Print one line per request on stderr: method, path, API, script turn, status."`
	Requests string        `name:"requests" type:"path" help:"On exit, write every recorded request (secrets redacted) here as JSON lines." placeholder:"FILE"`
	Latency  time.Duration `name:"latency" help:"Wait this long before answering each model request, as a hosted model would (for example 2s)." placeholder:"DURATION"`
}

// Help explains the server.
func (ModelServerCmd) Help() string {
	return `Serves OpenAI Chat Completions (/v1/chat/completions), OpenAI Responses (/v1/responses),
Anthropic Messages (/v1/messages) and Gemini (/v1beta/models/M:streamGenerateContent), streaming, with
tool calls, following the script: turn N is played when the conversation holds N tool results.
Actions: write (path, content), shell (command), leak_key (path: writes the API key the request
carried), text (text), error (status, body). Prints its URL, then serves until interrupted.
Give qwen-code and codex URL/v1, claude-code and gemini-cli the URL itself.`
}

// Run executes the command.
func (c *ModelServerCmd) Run(g *Globals, env *Env) error {
	script, err := modelserver.LoadScript(c.Script)
	if err != nil {
		return usagef("%v", err)
	}
	if c.Latency < 0 {
		return usagef("--latency %s is negative; give a duration such as 2s", c.Latency)
	}
	opts := modelserver.Options{Script: script, WorkDir: c.WorkDir, Latency: c.Latency}
	if c.Log {
		var mu sync.Mutex
		opts.OnRequest = func(r modelserver.Request) {
			mu.Lock()
			defer mu.Unlock()
			turn := "-"
			if r.Turn >= 0 {
				turn = fmt.Sprint(r.Turn + 1)
			}
			fmt.Fprintf(env.Stderr, "modelserver: %s %s (%s) turn %s -> %d\n", term(r.Method), term(r.Path), term(r.API), term(turn), r.Status)
		}
	}
	srv, err := modelserver.Start(opts, c.Listen)
	if err != nil {
		return usagef("%v (pick another --listen address)", err)
	}
	fmt.Fprintln(env.Stdout, srv.URL())
	<-env.Ctx.Done()
	_ = srv.Close()
	if c.Requests == "" {
		return nil
	}
	if err := writeRequests(srv, c.Requests); err != nil {
		fmt.Fprintf(env.Stderr, "cto-harness: %v\n", err)
		return exitError{ExitFailed}
	}
	return nil
}

func writeRequests(srv *modelserver.Server, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("modelserver: cannot write the recorded requests: %w", err)
	}
	if err := srv.WriteRequests(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
