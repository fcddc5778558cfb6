package sandbox_test

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// viewAction is the helper's set of metadata and listing attempts for the
// filesystem view tests. It reports false for an unknown action.
func viewAction(args []string, r *result) bool {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	var err error
	switch arg(0) {
	case "chmod":
		err = os.Chmod(arg(1), 0o777)
	case "utimes":
		t := time.Unix(1, 0)
		err = os.Chtimes(arg(1), t, t)
	case "setxattr":
		err = unix.Setxattr(arg(1), "user.cto-harness-test", []byte("x"), 0)
	case "chown":
		err = os.Chown(arg(1), 1, 1)
	case "link":
		err = os.Link(arg(1), arg(2))
	case "rename":
		err = os.Rename(arg(1), arg(2))
	case "list":
		var ents []os.DirEntry
		ents, err = os.ReadDir(arg(1))
		for _, e := range ents {
			r.List = append(r.List, e.Name())
		}
	case "cat":
		var b []byte
		b, err = os.ReadFile(arg(1))
		r.Fields = map[string]string{"content": string(b)}
	case "stat":
		_, err = os.Lstat(arg(1))
	default:
		return false
	}
	if err != nil {
		r.Err = err.Error()
		r.Errno = errnoName(err)
	} else {
		r.OK = true
	}
	return true
}
