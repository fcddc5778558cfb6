// Package ledger is the runs directory's cost ledger: one JSON line per run,
// appended when the run ends, so that what the runs cost can be summed
// without reading every run's evidence, and stays summable after old runs
// are pruned.
package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// File is the ledger's name, directly in the runs directory.
const File = "cost-ledger.jsonl"

// Path is the ledger of the runs directory runsDir.
func Path(runsDir string) string { return filepath.Join(runsDir, File) }

// Roles of a run's parties, the values of the "role" group.
const (
	RoleCase      = "case"
	RoleAdversary = "adversary"
)

// Group names Sum accepts.
const (
	GroupDay   = "day"
	GroupAgent = "agent"
	GroupModel = "model"
	GroupRole  = "role"
)

// groupNames is for error messages: the valid names, in one place.
const groupNames = "day, agent, model, role"

// maxProblemText caps the text a Problem quotes: a torn line can be long.
const maxProblemText = 200

// Entry is one run's line in the ledger.
type Entry struct {
	At       time.Time `json:"at"` // when the run ended
	RunID    string    `json:"run_id"`
	TrialID  string    `json:"trial_id,omitempty"` // the batch trial the run is of
	BatchID  string    `json:"batch_id,omitempty"`
	Stage    int       `json:"stage"`
	Status   string    `json:"status"` // pass, blocked or failed
	Outcome  string    `json:"outcome,omitempty"`
	Blockers []string  `json:"blockers,omitempty"` // blocker codes
	// Case and Adversary are the agents that ran; nil when none did.
	Case      *Party `json:"case,omitempty"`
	Adversary *Party `json:"adversary,omitempty"`
}

// Party is what one agent of a run used.
type Party struct {
	Agent            string `json:"agent"` // e.g. "qwen-code", "fake", "command"
	Model            string `json:"model"`
	Requests         int    `json:"requests"`
	InputTokens      int64  `json:"input_tokens"` // uncached input
	CacheReadTokens  int64  `json:"cache_read_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	// CostUSD is null when the cost is unknown: never 0 for "unknown", so a
	// sum can say how much of it is missing.
	CostUSD    *float64 `json:"cost_usd"`
	CostSource string   `json:"cost_source"` // reported, estimated or not_reported
}

// Problem is a ledger line Read skipped, so that one torn line (a crash
// mid-append) does not hide every other run.
type Problem struct {
	Line int    `json:"line"` // 1-based
	Text string `json:"text"` // the line's start, at most 200 bytes
	Err  string `json:"error"`
}

// Append adds e to the ledger of runsDir as one line. Runs of a batch append
// at once, so the write holds an exclusive flock and is a single write call;
// it is fsynced, since the line is the only record of the cost once the run
// is pruned. A symlink or anything but a regular file in the ledger's place
// is refused: the ledger is written where the runs directory says, nowhere
// else.
func Append(runsDir string, e Entry) (err error) {
	path := Path(runsDir)
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode the cost ledger entry of run %s: %w", e.RunID, err)
	}
	line = append(line, '\n')

	// O_RDWR rather than O_WRONLY: the last byte is read to mend a torn line.
	// O_NONBLOCK keeps a named pipe in the ledger's place from blocking the open.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("append to the cost ledger %s: it is a symlink, and the ledger is only written as a regular file in the runs directory: replace the link with the file it points to", path)
		}
		return fmt.Errorf("append to the cost ledger %s: %w (the runs directory must exist and be writable)", path, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the cost ledger %s after appending run %s: %w", path, e.RunID, cerr)
		}
	}()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock the cost ledger %s to append run %s: %w", path, e.RunID, err)
	}
	// Closing the file drops the lock.
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat the cost ledger %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("append to the cost ledger %s: it is a %s, not a regular file: move it away and run again", path, st.Mode().Type())
	}
	size := st.Size()
	if size > 0 {
		// A crash mid-append can leave a last line without its newline;
		// start on a line of our own, so only the torn line is lost.
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			return fmt.Errorf("read the end of the cost ledger %s: %w", path, err)
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if n, err := f.Write(line); err != nil || n != len(line) {
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("append run %s to the cost ledger %s: %w (is the disk full?)", e.RunID, path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync the cost ledger %s after appending run %s: %w", path, e.RunID, err)
	}
	if size == 0 {
		// The first line: the file may be new, and its name must last as
		// long as its content. Whoever writes first under the lock syncs it.
		if err := syncDir(runsDir); err != nil {
			return fmt.Errorf("fsync the runs directory %s after creating the cost ledger: %w", runsDir, err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read returns the ledger of runsDir in the order it was written. A missing
// ledger is an empty one (no run has ended yet). A line that does not parse
// is skipped and reported as a Problem, so that a torn line does not hide
// the rest; err is only for a ledger that cannot be read at all.
func Read(runsDir string) ([]Entry, []Problem, error) {
	path := Path(runsDir)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("read the cost ledger %s: it is a symlink, and only a regular file in the runs directory is read: replace the link with the file it points to", path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the cost ledger %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, nil, fmt.Errorf("stat the cost ledger %s: %w", path, err)
	} else if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read the cost ledger %s: it is a %s, not a regular file: move it away", path, st.Mode().Type())
	}

	var entries []Entry
	var problems []Problem
	r := bufio.NewReaderSize(f, 64<<10) // no line length limit, unlike a Scanner
	for n := 1; ; n++ {
		line, rerr := r.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, nil, fmt.Errorf("read line %d of the cost ledger %s: %w", n, path, rerr)
		}
		if text := bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(text)) > 0 {
			if e, perr := parse(text); perr != nil {
				problems = append(problems, Problem{Line: n, Text: capText(text), Err: perr.Error()})
			} else {
				entries = append(entries, e)
			}
		}
		if rerr == io.EOF {
			return entries, problems, nil
		}
	}
}

func parse(line []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return e, err
	}
	switch {
	case e.RunID == "":
		return e, errors.New("no run_id")
	case e.At.IsZero():
		return e, errors.New("no at (the run's end)")
	}
	return e, nil
}

// capText is the start of a line, cut on a character boundary.
func capText(b []byte) string {
	if len(b) <= maxProblemText {
		return string(b)
	}
	b = b[:maxProblemText]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Key is the group a Row sums: the values of the groups asked for, empty for
// the others, and agent, model and role empty too for the runs no agent ran
// in.
type Key struct {
	Day   string `json:"day,omitempty"` // UTC, YYYY-MM-DD
	Agent string `json:"agent,omitempty"`
	Model string `json:"model,omitempty"`
	Role  string `json:"role,omitempty"` // case or adversary
}

// Row is the sum of one group.
type Row struct {
	Key
	Runs             int   `json:"runs"` // distinct run ids
	Requests         int   `json:"requests"`
	InputTokens      int64 `json:"input_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	// CostUSD sums the known costs; it is null when no cost in the group is
	// known, so that unknown is never shown as $0.
	CostUSD *float64 `json:"cost_usd"`
	// UnknownCostRuns counts the parties (a run's Case or adversary) whose
	// cost is unknown and so is not in CostUSD.
	UnknownCostRuns int `json:"unknown_cost_runs"`
	Passes          int `json:"passes"` // distinct passing run ids
}

// Sum groups the entries that ended in [since, until) by the groups named in
// by (day, agent, model, role; none is one total row) and sums each group.
// A zero since or until is unbounded. Each of a run's parties counts in the
// group of its own agent, model and role, so a run with Case and adversary
// can add to two rows; a run without any agent counts once, with empty
// agent, model and role, and costs nothing. Rows are sorted by their group
// values in the order of by.
func Sum(entries []Entry, by []string, since, until time.Time) ([]Row, error) {
	var groups []string
	for _, g := range by {
		switch g {
		case GroupDay, GroupAgent, GroupModel, GroupRole:
		default:
			return nil, fmt.Errorf("cannot group the cost ledger by %q: the groups are %s", g, groupNames)
		}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}

	type sum struct {
		row          Row
		runs, passes map[string]bool
		cost         float64
		known        bool
	}
	sums := map[Key]*sum{}
	add := func(e Entry, role string, p *Party) {
		var k Key
		for _, g := range groups {
			switch g {
			case GroupDay:
				k.Day = e.At.UTC().Format(time.DateOnly)
			case GroupRole:
				k.Role = role
			case GroupAgent:
				if p != nil {
					k.Agent = p.Agent
				}
			case GroupModel:
				if p != nil {
					k.Model = p.Model
				}
			}
		}
		s := sums[k]
		if s == nil {
			s = &sum{row: Row{Key: k}, runs: map[string]bool{}, passes: map[string]bool{}}
			sums[k] = s
		}
		s.runs[e.RunID] = true
		if e.Status == "pass" {
			s.passes[e.RunID] = true
		}
		if p == nil {
			s.known = true // no agent ran: nothing was spent
			return
		}
		s.row.Requests += p.Requests
		s.row.InputTokens += p.InputTokens
		s.row.CacheReadTokens += p.CacheReadTokens
		s.row.CacheWriteTokens += p.CacheWriteTokens
		s.row.OutputTokens += p.OutputTokens
		if p.CostUSD == nil {
			s.row.UnknownCostRuns++
		} else {
			s.cost += *p.CostUSD
			s.known = true
		}
	}
	for _, e := range entries {
		if (!since.IsZero() && e.At.Before(since)) || (!until.IsZero() && !e.At.Before(until)) {
			continue
		}
		if e.Case == nil && e.Adversary == nil {
			add(e, "", nil)
		}
		if e.Case != nil {
			add(e, RoleCase, e.Case)
		}
		if e.Adversary != nil {
			add(e, RoleAdversary, e.Adversary)
		}
	}

	rows := make([]Row, 0, len(sums))
	for _, s := range sums {
		s.row.Runs, s.row.Passes = len(s.runs), len(s.passes)
		if s.known {
			c := s.cost
			s.row.CostUSD = &c
		}
		rows = append(rows, s.row)
	}
	sort.Slice(rows, func(i, j int) bool {
		for _, g := range groups {
			if a, b := rows[i].Value(g), rows[j].Value(g); a != b {
				return a < b
			}
		}
		return false
	})
	return rows, nil
}

// Value is the key's value of the group g (day, agent, model or role).
func (k Key) Value(g string) string {
	switch g {
	case GroupDay:
		return k.Day
	case GroupAgent:
		return k.Agent
	case GroupModel:
		return k.Model
	case GroupRole:
		return k.Role
	}
	return ""
}
