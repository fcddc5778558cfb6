//go:build darwin

package source

import "syscall"

// statTimes extracts the nanosecond mtime and ctime, which os.FileInfo does
// not expose (ctime is the point: any write or chmod changes it).
func statTimes(st *syscall.Stat_t) (mtimeNs, ctimeNs int64) {
	return st.Mtimespec.Sec*1e9 + st.Mtimespec.Nsec, st.Ctimespec.Sec*1e9 + st.Ctimespec.Nsec
}
