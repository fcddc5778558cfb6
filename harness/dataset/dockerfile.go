package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// environment is what a task's environment/Dockerfile gives the harness:
// the workdir and the files copied there from the build context (paths
// relative to the workdir), with notes on what does not map.
type environment struct {
	workdir string
	files   map[string]entry
	notes   []string
}

// copyIn is one COPY or ADD: sources in the build context, destination
// in the image.
type copyIn struct {
	srcs []string
	dest string
}

// readEnvironment reads environment/Dockerfile. The image itself (FROM)
// and what RUN, ENV and the like do are not mapped: the harness runs on
// this machine's toolchains. COPY and ADD from the build context into the
// workdir are the task's starting state; a Dockerfile that fetches its
// files (git clone, ADD of a URL), copies from another stage or sets no
// WORKDIR is not imported.
func readEnvironment(dir string) (environment, error) {
	env := environment{files: map[string]entry{}}
	if _, err := os.Stat(filepath.Join(dir, "docker-compose.yaml")); err == nil {
		return env, errors.New("environment/docker-compose.yaml: a multi-container environment is not mapped")
	}
	data, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		return env, errors.New("no environment/Dockerfile: nothing says what the task starts from")
	}
	var copies []copyIn
	var runs []string
	froms, wd := 0, "/"
	for _, line := range dockerLines(string(data)) {
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			froms++
			if froms == 1 {
				env.notes = append(env.notes, fmt.Sprintf("FROM %s: the image is not used; the task runs on this machine's toolchains", rest))
			}
		case "WORKDIR":
			wd = path.Clean(path.Join(wd, rest))
			env.workdir = wd
		case "COPY", "ADD":
			c, err := parseCopy(strings.ToUpper(word), rest, wd)
			if err != nil {
				return env, err
			}
			copies = append(copies, c)
		case "RUN":
			if strings.Contains(rest, "git clone") {
				return env, errors.New("the Dockerfile clones a repository (RUN git clone): its files come from the network; make the repository an owned clone and import the task as a SWE-bench instance instead")
			}
			runs = append(runs, rest)
		case "ENV", "ARG", "USER", "SHELL", "VOLUME":
			env.notes = append(env.notes, fmt.Sprintf("%s %s: not mapped", strings.ToUpper(word), rest))
		}
	}
	switch {
	case froms > 1:
		return env, errors.New("the Dockerfile has more than one stage: a multi-stage build is not mapped")
	case env.workdir == "" || env.workdir == "/":
		return env, errors.New("the Dockerfile sets no WORKDIR: nothing says where the task's files are")
	}
	if _, err := os.Stat(filepath.Join(dir, ".dockerignore")); err == nil {
		env.notes = append(env.notes, "environment/.dockerignore is not read: every file COPY names is in the starting state")
	}
	if len(runs) > 0 {
		env.notes = append(env.notes, fmt.Sprintf("%d RUN line(s) not run (the first: %q): install what they install on this machine, or give --setup", len(runs), clip(runs[0], 120)))
	}
	for _, c := range copies {
		if err := env.copy(dir, c); err != nil {
			return env, err
		}
	}
	return env, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// dockerLines are the Dockerfile's instructions: continuation lines
// joined, comments and blank lines dropped.
func dockerLines(data string) []string {
	var out []string
	var cur strings.Builder
	for _, raw := range strings.Split(strings.ReplaceAll(data, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
	}
	return out
}

// parseCopy reads COPY/ADD's arguments (plain or JSON form) with wd as
// the image's working directory.
func parseCopy(word, rest, wd string) (copyIn, error) {
	var args []string
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &args); err != nil {
			return copyIn{}, fmt.Errorf("%s %s: not a JSON list: %v", word, rest, err)
		}
	} else {
		args = strings.Fields(rest)
	}
	var plain []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--from="):
			return copyIn{}, fmt.Errorf("%s %s: copying from another image or stage is not mapped", word, rest)
		case strings.HasPrefix(a, "--"):
			continue // --chown, --chmod, --link: the harness's files are the user's
		default:
			plain = append(plain, a)
		}
	}
	if len(plain) < 2 {
		return copyIn{}, fmt.Errorf("%s %s: a source and a destination are needed", word, rest)
	}
	c := copyIn{srcs: plain[:len(plain)-1], dest: plain[len(plain)-1]}
	for _, s := range c.srcs {
		switch {
		case strings.Contains(s, "://"):
			return copyIn{}, fmt.Errorf("%s %s: a file fetched from the network is not mapped", word, rest)
		case strings.ContainsAny(s, "*?["):
			return copyIn{}, fmt.Errorf("%s %s: a wildcard source is not mapped", word, rest)
		case word == "ADD" && (strings.HasSuffix(s, ".tar") || strings.Contains(s, ".tar.") || strings.HasSuffix(s, ".tgz")):
			return copyIn{}, fmt.Errorf("%s %s: ADD unpacks archives, which is not mapped", word, rest)
		}
	}
	if !strings.HasPrefix(c.dest, "/") {
		d := path.Join(wd, c.dest)
		if strings.HasSuffix(c.dest, "/") || c.dest == "." {
			d += "/"
		}
		c.dest = d
	}
	return c, nil
}

// copy lays c's sources from the build context at their place below the
// workdir, as Docker would: a directory's contents go into the
// destination, a file to the destination (or into it, when it ends in /
// or there are several sources). Files outside the workdir are left out.
func (env *environment) copy(ctx string, c copyIn) error {
	for _, s := range c.srcs {
		rel := path.Clean(strings.TrimPrefix(s, "/"))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("COPY %s: the source leaves the build context", s)
		}
		src := filepath.Join(ctx, filepath.FromSlash(rel))
		fi, err := os.Lstat(src)
		if err != nil {
			return fmt.Errorf("COPY %s: %v", s, err)
		}
		dest := c.dest
		if fi.Mode().IsRegular() && (strings.HasSuffix(dest, "/") || len(c.srcs) > 1) {
			dest = path.Join(dest, path.Base(rel))
		}
		files := map[string]entry{}
		switch {
		case fi.IsDir():
			if files, err = readTree(src); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			files[""] = entry{data: data, exec: fi.Mode()&0o111 != 0}
		default:
			return fmt.Errorf("COPY %s: not a regular file or directory", s)
		}
		if err := env.place(path.Clean(dest), files, s); err != nil {
			return err
		}
	}
	return nil
}

// place puts files (relative to dest; "" is dest itself) into the
// starting state when dest lies in the workdir.
func (env *environment) place(dest string, files map[string]entry, src string) error {
	if dest != env.workdir && !strings.HasPrefix(dest, env.workdir+"/") {
		env.notes = append(env.notes, fmt.Sprintf("COPY %s to %s, outside the workdir %s: not mapped", src, dest, env.workdir))
		return nil
	}
	base := strings.TrimPrefix(strings.TrimPrefix(dest, env.workdir), "/")
	for rel, f := range files {
		p := path.Join(base, rel)
		if p == "" || p == "." || !safeRel(p) {
			return fmt.Errorf("COPY %s: the path %q in the workdir is not a plain path (or names .git)", src, p)
		}
		env.files[p] = f
	}
	return nil
}
