//go:build linux

package source

import "syscall"

// statTimes extracts the nanosecond mtime and ctime, which os.FileInfo does
// not expose (ctime is the point: any write or chmod changes it).
func statTimes(st *syscall.Stat_t) (mtimeNs, ctimeNs int64) {
	return st.Mtim.Sec*1e9 + st.Mtim.Nsec, st.Ctim.Sec*1e9 + st.Ctim.Nsec
}
