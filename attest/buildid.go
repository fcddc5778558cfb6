package attest

import (
	"debug/elf"
	"encoding/binary"
)

// BuildID reads the Go build ID note of the executable at p (what 'go tool
// buildid' prints), or returns "" when it has none or cannot be read.
func BuildID(p string) string {
	f, err := elf.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	data, err := sec.Data()
	if err != nil || len(data) < 16 {
		return ""
	}
	// An ELF note: namesz, descsz, type (4 bytes each), the name "Go\0\0", then the descriptor.
	bo := f.ByteOrder
	if bo == nil {
		bo = binary.LittleEndian
	}
	namesz, descsz := int(bo.Uint32(data[0:4])), int(bo.Uint32(data[4:8]))
	start := 12 + (namesz+3)&^3
	if namesz != 4 || string(data[12:15]) != "Go\x00" || start+descsz > len(data) {
		return ""
	}
	return string(data[start : start+descsz])
}
