package runlist

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Hold marks the run directory dir as in progress for as long as the
// returned release is not called and the process lives: an exclusive flock
// on the directory, which the kernel drops when the process ends however it
// ends (SIGKILL included). A run holds it from the moment its directory
// exists, so Prune can tell a killed run's leftover mounts from a live
// run's.
func Hold(dir string) (release func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the run directory %s to mark it in progress: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mark the run directory %s in progress: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// held reports whether a live process holds dir (see Hold). A directory
// that cannot be opened is taken as held: nothing of it is touched.
func held(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	return false
}

// staleMounts lists the mounts below runsDir (an overlay fixture, an overlay
// verification checkout) whose run no live process holds: a run killed
// before it could detach them. Below RUNS_DIR/matrix it is the replay's
// folder that must be held. Deepest first, so that unmounting in order
// never hides one mount under another.
func staleMounts(runsDir string) ([]string, error) {
	all, err := mountPoints()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mp := range all {
		rel, err := filepath.Rel(runsDir, mp)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		parts := strings.Split(rel, string(filepath.Separator))
		holder := filepath.Join(runsDir, parts[0])
		switch parts[0] {
		case WorkDir, legacyWorkDir:
			if len(parts) < 2 {
				continue
			}
			holder = filepath.Join(runsDir, parts[1])
		case MatrixDir:
			// A replay holds its own folder for as long as it runs.
			if len(parts) < 2 {
				continue
			}
			holder = filepath.Join(runsDir, MatrixDir, parts[1])
		}
		if !held(holder) {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// mountPoints are the mount points of /proc/self/mountinfo, unescaped.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	return out, nil
}

// unescapeMount undoes the octal escapes (\040 for a space, …) of a path
// in /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountStale detaches the stale mounts below runsDir (see staleMounts).
func unmountStale(runsDir string, dryRun bool) ([]string, error) {
	stale, err := staleMounts(runsDir)
	if err != nil || dryRun {
		return stale, err
	}
	for _, mp := range stale {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return stale, fmt.Errorf("unmount %s, left mounted by a run that was killed: %w (try: umount -l %s)", mp, err, mp)
		}
	}
	return stale, nil
}
