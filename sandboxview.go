package ctoharness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ViewRecord is the filesystem view Case or the verification command ran in:
// every mount of its new root, in the order the launcher made them, and a
// digest over them.
type ViewRecord struct {
	Mounts []ViewMount `json:"mounts"`
	Digest string      `json:"digest"`
	// ReadPaths and HidePaths are the configured lists the view was built
	// from (after the task narrowed them), for the reader; Mounts is what
	// counts.
	ReadPaths []string `json:"read_paths"`
	HidePaths []string `json:"hide_paths"`
}

// ViewMount is one mount of the view. Kind is bind, tmpfs, mask (an empty
// read-only mount over a hidden path), proc, device, symlink or overlay;
// Mode is ro or rw; Source is the host path of a bind, device or overlay, or
// a symlink's target; Layer is where an overlay's writes go (a per-run
// directory, so the host's Source never changes).
type ViewMount struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Source string `json:"source,omitempty"`
	Mode   string `json:"mode"`
	Layer  string `json:"layer,omitempty"`
	// Lowers are an overlay's read-only layers over Source (a kept build
	// cache), topmost first.
	Lowers []string `json:"lowers,omitempty"`
}

// View mount kinds and modes, as recorded.
const (
	ViewBind    = "bind"
	ViewTmpfs   = "tmpfs"
	ViewMask    = "mask"
	ViewProc    = "proc"
	ViewDevice  = "device"
	ViewSymlink = "symlink"
	ViewOverlay = "overlay" // a host directory shown with writes going to a per-run layer
	ViewRO      = "ro"
	ViewRW      = "rw"
)

// ViewDigest is the SHA-256 of the mounts' JSON; a validator recomputes it.
func ViewDigest(mounts []ViewMount) string {
	b, _ := json.Marshal(mounts)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
