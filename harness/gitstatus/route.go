package gitstatus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Input is one repository whose status Compute computes.
type Input struct {
	Root   string // worktree root
	GitDir string
	// Manifest is an lstat listing of Root ("." included), sorted bytewise
	// by path, as package source walks it.
	Manifest []ctoharness.ManifestEntry
	Repo     *git.Repository // the object store: trees and blobs
	HeadTree plumbing.Hash   // zero when HEAD has no commit
	Config   *Config
	Env      ConfigEnv
	// Ignored also lists ignored paths (code "!"), which a proof leaves out.
	Ignored bool
	// OnRead, when set, is told of every file read outside Root and GitDir
	// (core.excludesFile, attribute files), so that a caller can trace it.
	OnRead func(path string)
}

// Status codes beyond go-git's: a type change (file, symlink, gitlink).
const codeTypeChanged git.StatusCode = 'T'

// Compute is the status route: git status --porcelain=v2 --untracked-files=all
// --no-renames, computed from the manifest, the index and the object store
// without running git or anything the repository configures.
//
// For each index entry it compares what git compares: HEAD against the
// index (staged), and the index against the worktree, where cached stat
// data (mtime, ctime, inode, device, uid, gid, size, mode) vouches for
// content only when every field matches and the entry is not racy;
// otherwise the file is hashed after git's own input conversions
// (core.autocrlf, text/eol/crlf and ident attributes). Untracked and
// ignored paths follow git's exclude rules (.gitignore files, info/exclude,
// core.excludesFile, directories excluded as a whole, nested repositories
// listed as "dir/"). Submodules are compared by their HEAD and, recursively,
// their own status.
//
// It is stricter than git only where git hides a real change:
// assume-unchanged entries are compared like any other (a skip-worktree
// entry is left alone, as git leaves it: the user asked for it, and the
// copy is made from HEAD), untracked files are listed
// whatever status.showUntrackedFiles says, submodules are compared
// whatever submodule.<name>.ignore says, and stat data is compared to the
// nanosecond.
func Compute(in *Input) ([]ctoharness.StatusEntry, error) {
	if err := CheckConfig(in.Config, in.GitDir, in.Root); err != nil {
		return nil, err
	}
	idx, err := readFullIndex(in.GitDir, (&manifestNames{m: in.Manifest}).name)
	if err != nil {
		return nil, err
	}
	wt, err := openWorktreeDir(in.Root)
	if err != nil {
		return nil, err
	}
	defer wt.close()
	c := &computer{in: in, idx: idx, wt: wt, h: newBlobHasher(), attrDirs: map[string]*attrFile{}}
	if err := c.loadSettings(); err != nil {
		return nil, err
	}
	return c.run()
}

// CheckConfig refuses repositories the route must not or cannot compute a
// status for: one whose git would run an fsmonitor hook, whose worktree is
// elsewhere (core.worktree), or whose format it does not read.
//
// core.worktree is honoured when it names root itself (as a submodule's
// git directory under .git/modules does) and refused otherwise.
func CheckConfig(cfg *Config, gitDir, root string) error {
	if v, ok := cfg.Get("core.worktree"); ok && !sameDir(v, gitDir, root) {
		return refuse(ctoharness.BlockSourceCoreWorktree,
			"core.worktree is set (%q), so git's worktree is not the directory given; unset it, or pass a standalone clone", v)
	}
	if v, ok := cfg.Get("core.fsmonitor"); ok {
		on, err := cfg.Bool("core.fsmonitor", false)
		switch {
		case err != nil:
			return refuse(ctoharness.BlockSourceFsmonitorConfigured,
				"core.fsmonitor is set to a hook (%q): git would run it for this repository's status, and the harness never runs what a source configures; unset core.fsmonitor", v)
		case on && runtime.GOOS != "linux":
			return refuse(ctoharness.BlockSourceFsmonitorConfigured,
				"core.fsmonitor is true: git would start its fsmonitor daemon for this repository, and the harness never runs what a source configures; unset core.fsmonitor")
		}
		// true on Linux: git has no fsmonitor daemon there and scans the
		// worktree, as the route does; nothing would run.
	}
	if on, err := cfg.Bool("core.usebuiltinfsmonitor", false); err != nil || on {
		return refuse(ctoharness.BlockSourceFsmonitorConfigured,
			"core.useBuiltinFSMonitor is set: git would start its fsmonitor daemon for this repository, and the harness never runs what a source configures; unset it")
	}
	version := 0
	if v, ok := cfg.Get("core.repositoryformatversion"); ok {
		fmt.Sscan(v, &version)
	}
	if version > 1 {
		return refuse(ctoharness.BlockSourceGitFeature, "core.repositoryformatversion is %d; only 0 and 1 are understood", version)
	}
	if v, ok := cfg.Get("extensions.objectformat"); ok && !strings.EqualFold(v, "sha1") {
		return refuse(ctoharness.BlockSourceObjectFormat,
			"extensions.objectFormat is %q: the harness reads SHA-1 repositories only; use a SHA-1 clone", v)
	}
	if v, ok := cfg.Get("extensions.refstorage"); ok && !strings.EqualFold(v, "files") {
		return refuse(ctoharness.BlockSourceRefStorage,
			"extensions.refStorage is %q: the harness reads the files ref backend only; use a clone with files refs (git refs migrate --ref-format=files)", v)
	}
	if version >= 1 {
		for _, k := range cfg.Keys("extensions.") {
			switch k {
			case "extensions.objectformat", "extensions.refstorage", "extensions.worktreeconfig",
				"extensions.preciousobjects", "extensions.partialclone", "extensions.noop":
			default:
				return refuse(ctoharness.BlockSourceGitFeature, "repository extension %s is not understood by the harness", k)
			}
		}
	}
	if on, _ := cfg.Bool("core.ignorecase", false); on {
		return refuse(ctoharness.BlockSourceGitFeature,
			"core.ignorecase is true: case-insensitive path matching is not modelled; use a clone on a case-sensitive filesystem")
	}
	return nil
}

// computer holds one status computation.
type computer struct {
	in  *Input
	idx *Index
	wt  *worktreeDir // every worktree file is read through it, by its path relative to the root
	h   *blobHasher

	fileMode, symlinks bool
	// sparseClears: core.sparseCheckout is on and files outside the
	// patterns are not expected, so git clears skip-worktree on any path
	// present in the worktree.
	sparseClears bool
	autocrlf     string
	lfs          bool              // filter=lfs is git-lfs as installed (done natively)
	drivers      map[string]string // configured filter drivers named by an attribute file -> a configured key
	excl         excluder
	attrGlobal   []*attrFile // info/attributes first, then global, system
	attrInfo     *attrFile
	attrDirs     map[string]*attrFile // in-tree .gitattributes by directory ("" or "dir/")
	macros       map[string][]attrAssign

	tracked []bool // per manifest entry: the index has it
}

func (c *computer) loadSettings() error {
	cfg := c.in.Config
	var err error
	if c.fileMode, err = cfg.Bool("core.filemode", true); err != nil {
		return err
	}
	if c.symlinks, err = cfg.Bool("core.symlinks", true); err != nil {
		return err
	}
	sparse, err := cfg.Bool("core.sparsecheckout", false)
	if err != nil {
		return err
	}
	expect, err := cfg.Bool("sparse.expectfilesoutsideofpatterns", false)
	if err != nil {
		return err
	}
	c.sparseClears = sparse && !expect
	c.autocrlf = "false"
	if v, ok := cfg.Get("core.autocrlf"); ok {
		if strings.EqualFold(v, "input") {
			c.autocrlf = "input"
		} else if on, err := cfg.Bool("core.autocrlf", false); err != nil {
			return err
		} else if on {
			c.autocrlf = "true"
		}
	}
	// Exclude files outside the worktree: info/exclude, then core.excludesFile.
	if data, err := readExcludeFile(CommonDir(c.in.GitDir) + "/info/exclude"); err != nil {
		return err
	} else if data != nil {
		c.excl.global = append(c.excl.global, parseIgnoreFile(data, ""))
	}
	ex, ok := cfg.Get("core.excludesfile")
	if ok {
		ex = c.outsidePath(ex)
	} else if x := c.in.Env.xdgDir(); x != "" {
		ex = filepath.Join(x, "ignore")
	}
	if ex != "" {
		if data, err := readExcludeFile(ex); err != nil {
			return err
		} else if data != nil {
			c.outsideRead(ex)
			c.excl.global = append(c.excl.global, parseIgnoreFile(data, ""))
		}
	}
	// Attribute files outside the worktree.
	c.macros = cloneMacros(builtinMacros)
	addGlobal := func(p string) error {
		data, err := readOptional(p)
		if err != nil || data == nil {
			return err
		}
		c.outsideRead(p)
		f := parseAttrFile(data, "", true)
		c.attrGlobal = append(c.attrGlobal, f)
		return nil
	}
	if data, err := readOptional(CommonDir(c.in.GitDir) + "/info/attributes"); err != nil {
		return err
	} else if data != nil {
		c.attrInfo = parseAttrFile(data, "", true)
	}
	af, ok := cfg.Get("core.attributesfile")
	if ok {
		af = c.outsidePath(af)
	} else if x := c.in.Env.xdgDir(); x != "" {
		af = filepath.Join(x, "attributes")
	}
	if af != "" {
		if err := addGlobal(af); err != nil {
			return err
		}
	}
	if on, err := systemAttributes(c.in.Env); err != nil {
		return err
	} else if on {
		if err := addGlobal("/etc/gitattributes"); err != nil {
			return err
		}
	}
	// In-tree .gitattributes files, read up front so that a filter or a
	// working-tree-encoding is refused whatever state the files are in.
	for k := range c.in.Manifest {
		e := &c.in.Manifest[k]
		if e.Type != ctoharness.EntryFile || !(e.Path == ".gitattributes" || strings.HasSuffix(e.Path, "/.gitattributes")) || underDotGit(e.Path) {
			continue
		}
		data, err := c.wt.readFile(e.Path)
		if err != nil {
			return fmt.Errorf("read attributes file %s: %w", e.Path, err)
		}
		dir := strings.TrimSuffix(e.Path, ".gitattributes")
		c.attrDirs[dir] = parseAttrFile(data, dir, dir == "")
	}
	// Like git, a .gitattributes missing from the worktree is read from
	// the index.
	for i := range c.idx.Entries {
		e := &c.idx.Entries[i]
		if e.Stage != 0 || e.IntentToAdd || !(e.Name == ".gitattributes" || strings.HasSuffix(e.Name, "/.gitattributes")) {
			continue
		}
		dir := strings.TrimSuffix(e.Name, ".gitattributes")
		if _, ok := c.attrDirs[dir]; ok || e.Mode != filemode.Regular && e.Mode != filemode.Executable {
			continue
		}
		data, err := c.readBlob(e.Hash)
		if err != nil {
			return fmt.Errorf("read attributes file %s from the index: %w", e.Name, err)
		}
		c.attrDirs[dir] = parseAttrFile(data, dir, dir == "")
	}
	all := slices.Clone(c.attrGlobal)
	if c.attrInfo != nil {
		all = append(all, c.attrInfo)
	}
	for _, f := range c.attrDirs {
		all = append(all, f)
	}
	for _, f := range all {
		for name, m := range f.macros {
			c.macros[name] = m
		}
	}
	c.lfs = standardLFS(c.in.Config)
	for _, f := range all {
		if err := c.checkAttrFile(f); err != nil {
			return err
		}
	}
	return c.checkFilteredPaths()
}

// checkFilteredPaths refuses the repository when a tracked path's filter
// attribute names a configured driver (other than git-lfs, which is done
// natively): git would run it to compute the status. A driver named only
// for paths that are not tracked (an ignored node_modules/x/.gitattributes)
// is never run by a status, so it is no reason to refuse.
func (c *computer) checkFilteredPaths() error {
	if len(c.drivers) == 0 {
		return nil
	}
	for i := range c.idx.Entries {
		e := &c.idx.Entries[i]
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated {
			continue
		}
		d := c.attrs(e.Name)["filter"]
		if key, ok := c.drivers[d]; ok {
			v, _ := c.in.Config.Get(key)
			return refuse(ctoharness.BlockSourceFilterConfigured,
				"tracked path %s has the filter attribute %q and %s is configured (%q): git would run it to compute the status, and the harness never runs what a source configures; remove the filter attribute or the %s setting", e.Name, d, key, v, key)
		}
	}
	return nil
}

// checkAttrFile refuses attributes that would make git run a configured
// filter driver, or convert an encoding the route does not model.
func (c *computer) checkAttrFile(f *attrFile) error {
	check := func(as []attrAssign) error {
		for _, a := range as {
			switch {
			case a.name == "filter" && a.value != attrTrue && a.value != attrFalse && a.value != "":
				if a.value == "lfs" && c.lfs {
					continue // git-lfs as installed: done natively
				}
				for _, k := range []string{"clean", "smudge", "process"} {
					key := "filter." + a.value + "." + k
					if v, ok := c.in.Config.Get(key); ok && v != "" {
						if c.drivers == nil {
							c.drivers = map[string]string{}
						}
						c.drivers[a.value] = key // refused if a tracked path uses it
						break
					}
				}
			case a.name == "working-tree-encoding" && a.value != attrTrue && a.value != attrFalse && a.value != "":
				return refuse(ctoharness.BlockSourceGitFeature,
					"the working-tree-encoding attribute (%q) is not modelled by the harness's status; remove it from .gitattributes", a.value)
			}
		}
		return nil
	}
	for _, l := range f.lines {
		if err := check(l.assigns); err != nil {
			return err
		}
	}
	for _, m := range f.macros {
		if err := check(m); err != nil {
			return err
		}
	}
	return nil
}

func cloneMacros(m map[string][]attrAssign) map[string][]attrAssign {
	out := make(map[string][]attrAssign, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// outsideRead reports a read outside the repository to the caller.
func (c *computer) outsideRead(p string) {
	if c.in.OnRead != nil && !within(p, c.in.Root) && !within(p, c.in.GitDir) {
		c.in.OnRead(p)
	}
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// outsidePath resolves a configured file name as git does when run at the
// worktree root: "~" is $HOME, a relative name is under the root.
func (c *computer) outsidePath(p string) string {
	p = expandHome(p, c.in.Env)
	if p != "" && !filepath.IsAbs(p) {
		p = filepath.Join(c.in.Root, p)
	}
	return p
}

func expandHome(p string, env ConfigEnv) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return env.homeDir() + p[1:]
	}
	return p
}

// readExcludeFile reads an exclude file outside the worktree
// (info/exclude, core.excludesFile): nil when git would skip it (missing
// or unreadable). One git can open but not read, a directory, makes git
// fail ("cannot use ... as an exclude file"), so the status is refused.
func readExcludeFile(p string) ([]byte, error) {
	data, err := readOptional(p)
	if err == nil && data == nil {
		if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
			return nil, refuse(ctoharness.BlockSourceUnreadable,
				"exclude file %s is a directory, so git cannot compute a status (\"cannot use %s as an exclude file\"); point core.excludesFile at a file", p, p)
		}
	}
	return data, err
}

// readOptional reads a file outside the worktree that git reads if it is
// there: nil when it is missing.
func readOptional(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || isDirErr(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

func isDirErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory")
}

// underDotGit reports whether a path has a component named .git.
func underDotGit(p string) bool {
	return p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/") || strings.HasSuffix(p, "/.git")
}

// find is the manifest entry at path, or nil.
func (c *computer) find(path string) (int, *ctoharness.ManifestEntry) {
	m := c.in.Manifest
	k := sort.Search(len(m), func(i int) bool { return m[i].Path >= path })
	if k < len(m) && m[k].Path == path {
		return k, &m[k]
	}
	return -1, nil
}

type pathStatus struct{ x, y byte }

func (c *computer) run() ([]ctoharness.StatusEntry, error) {
	st := map[string]*pathStatus{}
	get := func(p string) *pathStatus {
		s := st[p]
		if s == nil {
			s = &pathStatus{x: '.', y: '.'}
			st[p] = s
		}
		return s
	}
	// Staged: HEAD against the stage-0 entries git would write as a tree:
	// the index itself until an entry it must leave out (a copy of a
	// million entries would be the run's largest allocation).
	unmerged := map[string]uint8{}
	overlaps := sparseOverlaps(c.idx.Entries)
	stage0, copied := c.idx.Entries, false
	for i := range c.idx.Entries {
		e := &c.idx.Entries[i]
		switch {
		case e.Stage != 0:
			unmerged[e.Name] |= 1 << (e.Stage - 1)
		case e.IntentToAdd:
		case overlaps[e.Name]:
			get(e.Name).x = 'A'
		default:
			if copied {
				stage0 = append(stage0, *e)
			}
			continue
		}
		if !copied {
			stage0, copied = slices.Clone(c.idx.Entries[:i]), true
		}
	}
	staged, err := DiffIndex(c.in.Repo, c.in.HeadTree, &Index{Entries: stage0})
	if err != nil {
		return nil, err
	}
	for p, code := range staged {
		if _, u := unmerged[p]; !u {
			get(p).x = byte(code)
		}
	}
	for p, mask := range unmerged {
		s := get(p)
		s.x, s.y = unmergedCodes[mask][0], unmergedCodes[mask][1]
	}

	// Worktree: the index against the manifest.
	c.tracked = make([]bool, len(c.in.Manifest))
	for i := range c.idx.Entries {
		e := &c.idx.Entries[i]
		if e.Stage != 0 {
			// A directory where a conflicted file was is walked for
			// untracked files, as git walks it.
			if k, f := c.find(e.Name); k >= 0 && (f.Type != ctoharness.EntryDir || e.Mode&modeTypeMask == modeGitlink) {
				c.tracked[k] = true
			}
			continue
		}
		y, err := c.worktree(e)
		if err != nil {
			return nil, err
		}
		if y != '.' {
			get(e.Name).y = y
		}
	}

	// Untracked and ignored paths.
	var extra []ctoharness.StatusEntry
	if err := c.untracked(func(p string, ignored bool) {
		if ignored && !c.in.Ignored {
			return
		}
		code := "?"
		if ignored {
			code = "!"
		}
		extra = append(extra, ctoharness.StatusEntry{Path: p, Staging: code, Worktree: code})
	}); err != nil {
		return nil, err
	}

	out := make([]ctoharness.StatusEntry, 0, len(st)+len(extra))
	for p, s := range st {
		if s.x == '.' && s.y == '.' {
			continue
		}
		out = append(out, ctoharness.StatusEntry{Path: p, Staging: codeString(s.x), Worktree: codeString(s.y)})
	}
	out = append(out, extra...)
	slices.SortFunc(out, func(a, b ctoharness.StatusEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func codeString(b byte) string {
	if b == '.' {
		return " "
	}
	return string(rune(b))
}

// unmergedCodes maps the stages present (bit 0: base, 1: ours, 2: theirs)
// to git's two-letter code.
var unmergedCodes = map[uint8]string{1: "DD", 2: "AU", 3: "UD", 4: "UA", 5: "DU", 6: "AA", 7: "UU"}

// worktree compares one stage-0 index entry with the worktree and returns
// git's worktree code: '.', 'M', 'D', 'T' or 'A' (intent to add).
func (c *computer) worktree(e *Entry) (byte, error) {
	if e.Mode&modeTypeMask == modeDir {
		return '.', nil // a sparse directory: not in the worktree by design
	}
	k, f := c.find(e.Name)
	if k >= 0 && (f.Type != ctoharness.EntryDir || e.Mode&modeTypeMask == modeGitlink) {
		c.tracked[k] = true
	}
	if e.SkipWorktree && (f == nil || !c.sparseClears) {
		// git does not look at a skip-worktree path: absent, as outside a
		// sparse checkout, or present with local changes the user asked
		// git to leave alone (update-index --skip-worktree). In a sparse
		// checkout git clears the bit of any path present in the worktree
		// and compares it. The copy is made from HEAD, so a hidden local
		// change never reaches the fixture.
		return '.', nil
	}
	if e.Mode&modeTypeMask == modeGitlink {
		return c.gitlink(e, f)
	}
	if f == nil {
		return 'D', nil
	}
	if f.Type == ctoharness.EntryDir {
		return c.replacedByDir(e)
	}
	if e.IntentToAdd {
		return 'A', nil
	}
	entryLink := e.Mode == filemode.Symlink
	wtLink := f.Type == ctoharness.EntrySymlink
	if entryLink && !c.symlinks && f.Type == ctoharness.EntryFile {
		wtLink = true // core.symlinks=false: the link is a plain file
	}
	if entryLink != wtLink {
		return 'T', nil
	}
	if !entryLink && c.fileMode && (uint32(e.Mode)^f.Mode)&0o100 != 0 {
		return 'M', nil
	}
	if f.Type != ctoharness.EntryFile && f.Type != ctoharness.EntrySymlink {
		return 'M', nil // a FIFO or device where a file was: git reads it as changed
	}
	if c.statMatches(e, f) {
		return '.', nil
	}
	if e.Size != 0 && e.Size != uint32(f.Size) {
		return 'M', nil // git trusts a size change without reading
	}
	sum, err := c.contentHash(e, f)
	if errors.Is(err, errSizeChanged) {
		return 'M', nil
	}
	if err != nil {
		return 0, err
	}
	if sum != e.Hash {
		return 'M', nil
	}
	return '.', nil
}

// emptyBlob is the id of the empty blob.
var emptyBlob = ObjectHash("blob", nil)

// statMatches reports whether the index's cached stat data still stands
// for f: every field git caches equal, the entry not racily clean (written
// in the same second as the index or later) and not smudged (size zero
// for non-empty content).
func (c *computer) statMatches(e *Entry, f *ctoharness.ManifestEntry) bool {
	if e.MtimeNs == 0 || c.idx.ModTime.IsZero() {
		return false
	}
	if e.Size == 0 && e.Hash != emptyBlob {
		return false
	}
	if e.MtimeNs/1e9 >= c.idx.ModTime.Unix() {
		return false // racy
	}
	return e.MtimeNs == f.MtimeNs && e.CtimeNs == f.CtimeNs && e.Ino == uint32(f.Inode) &&
		e.Dev == uint32(f.Dev) && e.UID == f.UID && e.GID == f.GID && e.Size == uint32(f.Size)
}

// contentHash is the blob id git would compute for f as the content of
// e's path: a symlink's target, or the file after input conversions.
func (c *computer) contentHash(e *Entry, f *ctoharness.ManifestEntry) (plumbing.Hash, error) {
	if f.Type == ctoharness.EntrySymlink {
		return ObjectHash("blob", []byte(f.Target())), nil
	}
	attrs := c.attrs(e.Name)
	conv := conversionFor(attrs, c.autocrlf)
	if c.lfs && attrs["filter"] == "lfs" {
		data, err := c.wt.readExact(f.Path, f.Size)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		data, err = conv.toGit(lfsClean(data), func() (bool, error) { return c.blobHasCRLF(e.Hash) })
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return ObjectHash("blob", data), nil
	}
	if conv.none() {
		file, err := c.wt.openConfined(f.Path)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		defer file.Close()
		return c.h.opened(file, c.wt.name(f.Path), f.Size)
	}
	data, err := c.wt.readExact(f.Path, f.Size)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	data, err = conv.toGit(data, func() (bool, error) { return c.blobHasCRLF(e.Hash) })
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ObjectHash("blob", data), nil
}

// blobHasCRLF reads a blob of the object store and reports whether it is
// text with CRLF line endings (git then leaves CRLF alone under "auto").
func (c *computer) blobHasCRLF(h plumbing.Hash) (bool, error) {
	data, err := c.readBlob(h)
	if err != nil {
		return false, err
	}
	return hasCRLFText(data), nil
}

// readBlob reads a blob from the object store.
func (c *computer) readBlob(h plumbing.Hash) ([]byte, error) {
	if c.in.Repo == nil {
		return nil, fmt.Errorf("read blob %s: no object store", h)
	}
	b, err := c.in.Repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return data, nil
}

// attrs resolves the conversion attributes of a path.
func (c *computer) attrs(path string) map[string]string {
	s := stackFor(path, c.macros, c.attrInfo, c.attrDirs, c.attrGlobal)
	return s.lookup(path, "text", "crlf", "eol", "ident", "filter")
}

// gitlink compares a gitlink entry with its directory: absent is deleted,
// an empty or unpopulated directory is unchanged, a populated one is
// modified when its HEAD differs from the gitlink or its own status is
// not clean (untracked files included), as git reports submodules.
func (c *computer) gitlink(e *Entry, f *ctoharness.ManifestEntry) (byte, error) {
	if f == nil {
		return 'D', nil
	}
	if f.Type != ctoharness.EntryDir {
		return 'T', nil
	}
	sub, err := c.openSub(e.Name)
	if err != nil || sub == nil {
		return '.', err
	}
	if sub.head != e.Hash {
		return 'M', nil
	}
	st, err := Compute(sub.in)
	if err != nil {
		return 0, fmt.Errorf("submodule %s: %w", e.Name, err)
	}
	if len(st) > 0 {
		return 'M', nil
	}
	return '.', nil
}

// untracked walks the manifest for paths the index does not have and
// reports each as untracked or ignored (git's -uall listing: files, and
// nested repositories as "dir/").
func (c *computer) untracked(emit func(path string, ignored bool)) error {
	type dirState struct {
		skip     bool
		excluded bool
		lists    []ignoreList
	}
	root := &dirState{}
	if data, err := c.readInTree(".gitignore"); err != nil {
		return err
	} else if data != nil {
		root.lists = []ignoreList{parseIgnoreFile(data, "")}
	}
	dirs := map[string]*dirState{"": root}
	m := c.in.Manifest
	idx := c.idx.Entries
	for k := range m {
		e := &m[k]
		p := e.Path
		if p == "." {
			continue
		}
		parent, name := "", p
		if slash := strings.LastIndexByte(p, '/'); slash >= 0 {
			parent, name = p[:slash], p[slash+1:]
		}
		ps := dirs[parent]
		if ps == nil || ps.skip || name == ".git" {
			if e.Type == ctoharness.EntryDir {
				dirs[p] = &dirState{skip: true}
			}
			continue
		}
		if e.Type == ctoharness.EntryDir {
			ds := &dirState{excluded: ps.excluded}
			dirs[p] = ds
			if c.tracked[k] {
				ds.skip = true // a gitlink: its contents are the submodule's
				continue
			}
			if !ds.excluded {
				ds.excluded = c.excl.excluded(ps.lists, p, true)
			}
			if !hasIndexPrefix(idx, p+"/") {
				if nested, err := c.isRepo(p); err != nil {
					return err
				} else if nested {
					ds.skip = true
					// git drops an untracked "dir/" whose name the index
					// has (index_name_is_other): a file replaced by a
					// repository is listed as deleted or type-changed
					// only (replacedByDir).
					if !c.inIndex(p) {
						emit(p+"/", ds.excluded)
					}
					continue
				}
			}
			ds.lists = ps.lists
			if !ds.excluded {
				data, err := c.readInTree(p + "/.gitignore")
				if err != nil {
					return err
				}
				if data != nil {
					ds.lists = append(slices.Clip(ps.lists), parseIgnoreFile(data, p+"/"))
				}
			}
			continue
		}
		if c.tracked[k] || (e.Type != ctoharness.EntryFile && e.Type != ctoharness.EntrySymlink) {
			continue
		}
		emit(p, ps.excluded || c.excl.excluded(ps.lists, p, false))
	}
	return nil
}

// indexEntry is the stage-0 index entry named p, or nil.
func (c *computer) indexEntry(p string) *Entry {
	idx := c.idx.Entries
	k := sort.Search(len(idx), func(i int) bool { return idx[i].Name >= p })
	for ; k < len(idx) && idx[k].Name == p; k++ {
		if idx[k].Stage == 0 {
			return &idx[k]
		}
	}
	return nil
}

// inIndex reports whether the index has an entry named p at any stage.
func (c *computer) inIndex(p string) bool {
	idx := c.idx.Entries
	k := sort.Search(len(idx), func(i int) bool { return idx[i].Name >= p })
	return k < len(idx) && idx[k].Name == p
}

// hasIndexPrefix reports whether some index entry lies under dir (which
// ends in "/").
func hasIndexPrefix(idx []Entry, dir string) bool {
	k := sort.Search(len(idx), func(i int) bool { return idx[i].Name >= dir })
	return k < len(idx) && strings.HasPrefix(idx[k].Name, dir)
}

// readInTree reads an in-tree ignore file if it is a regular file (git no
// longer follows a symlinked one). One that cannot be opened is read from
// the index when its entry is skip-worktree, as in a sparse checkout.
func (c *computer) readInTree(rel string) ([]byte, error) {
	_, f := c.find(rel)
	if f == nil || f.Type == ctoharness.EntrySymlink {
		if e := c.indexEntry(rel); e != nil && e.SkipWorktree && !e.IntentToAdd &&
			(e.Mode == filemode.Regular || e.Mode == filemode.Executable) {
			data, err := c.readBlob(e.Hash)
			if err != nil {
				return nil, fmt.Errorf("read ignore file %s from the index: %w", rel, err)
			}
			return data, nil
		}
		return nil, nil
	}
	if f.Type != ctoharness.EntryFile {
		return nil, nil
	}
	data, err := c.wt.readFile(rel)
	if err != nil {
		return nil, fmt.Errorf("read ignore file %s: %w", rel, err)
	}
	return data, nil
}

// isRepo reports whether the worktree directory rel holds a repository of
// its own (git's is_nonbare_repository_dir): a .git directory with HEAD,
// objects and refs, or a gitfile pointing to one.
func (c *computer) isRepo(rel string) (bool, error) {
	gd, err := c.subGitDir(rel)
	return gd != "", err
}

// subGitDir resolves the git directory of the worktree directory rel, or
// "" when it has none.
func (c *computer) subGitDir(rel string) (string, error) {
	_, f := c.find(rel + "/.git")
	if f == nil {
		return "", nil
	}
	gd := c.in.Root + "/" + rel + "/.git"
	switch f.Type {
	case ctoharness.EntryDir:
	case ctoharness.EntryFile:
		data, err := c.wt.readFile(rel + "/.git")
		if err != nil {
			return "", fmt.Errorf("read gitfile %s: %w", gd, err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		target, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
		if !ok {
			return "", nil
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(c.in.Root, rel, target)
		}
		gd = target
	default:
		return "", nil
	}
	ok, err := isGitDir(gd)
	if err != nil {
		return "", nestedTooLong(rel, gd, err)
	}
	if !ok {
		return "", nil
	}
	return gd, nil
}

// nestedTooLong is the refusal of a nested repository (or submodule) at
// rel whose git directory gd cannot be read for its path's length: the
// route reads nested repositories by absolute path, so it cannot tell
// whether git would list the directory, compare it or fail (git 2.39 dies
// on such a path: "Invalid path").
func nestedTooLong(rel, gd string, err error) error {
	return refuse(ctoharness.BlockSourceGitFeature,
		"%s may hold a nested repository, but its git directory's path (%d bytes) is too long for the harness, which reads nested repositories and submodules by absolute path (%v; PATH_MAX is %d); move it to a shorter path",
		rel, len(gd), err, unix.PathMax)
}

// sameDir reports whether the core.worktree value v (relative to gitDir)
// names the directory root.
func sameDir(v, gitDir, root string) bool {
	if !filepath.IsAbs(v) {
		v = filepath.Join(gitDir, v)
	}
	a, err1 := filepath.EvalSymlinks(v)
	b, err2 := filepath.EvalSymlinks(root)
	return err1 == nil && err2 == nil && a == b
}

// HeadBranch is the branch HEAD names in gitDir, "" when it is detached or
// unreadable; it is all the configuration lookup needs before the object
// format is known.
func HeadBranch(gitDir string) string {
	data, err := os.ReadFile(gitDir + "/HEAD")
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return ref
}

// isGitDir is git's is_git_directory: a valid HEAD in gd, and objects and
// refs in its common directory, which a linked worktree's git directory
// names in its commondir file. A path too long to read is an error, not a
// "no": taken for a plain directory, it would hide a repository git finds.
func isGitDir(gd string) (bool, error) {
	common := CommonDir(gd)
	for _, p := range []string{gd + "/commondir", common + "/objects", common + "/refs", gd + "/HEAD"} {
		if len(p) >= unix.PathMax {
			return false, fmt.Errorf("%.60s...: %w", p, syscall.ENAMETOOLONG)
		}
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(common + "/" + sub); err != nil || !fi.IsDir() {
			return false, nil
		}
	}
	head, err := os.ReadFile(gd + "/HEAD")
	if err != nil {
		return false, nil
	}
	h := strings.TrimSpace(string(head))
	return strings.HasPrefix(h, "ref: refs/") || plumbing.IsHash(h), nil
}

// subRepo is an opened submodule: its HEAD and its status input.
type subRepo struct {
	head plumbing.Hash
	in   *Input
}

// openSub opens the submodule checked out at rel, or returns nil when it
// is not populated.
func (c *computer) openSub(rel string) (*subRepo, error) {
	gd, err := c.subGitDir(rel)
	if err != nil || gd == "" {
		return nil, err
	}
	cfg, err := LoadConfig(gd, HeadBranch(gd), c.in.Env)
	if err != nil {
		return nil, fmt.Errorf("submodule %s: %w", rel, err)
	}
	if err := CheckConfig(cfg, gd, c.in.Root+"/"+rel); err != nil {
		return nil, err
	}
	_, head, err := ResolveHead(gd)
	if err != nil {
		return nil, fmt.Errorf("submodule %s: %w", rel, err)
	}
	r, err := Open(c.in.Root+"/"+rel, gd)
	if err != nil {
		return nil, fmt.Errorf("submodule %s: %w", rel, err)
	}
	var tree plumbing.Hash
	if head != plumbing.ZeroHash {
		commit, err := r.CommitObject(head)
		if err != nil {
			return nil, fmt.Errorf("submodule %s: read HEAD commit %s: %w", rel, head, err)
		}
		tree = commit.TreeHash
	}
	prefix := rel + "/"
	var sub []ctoharness.ManifestEntry
	if _, d := c.find(rel); d != nil {
		dot := *d
		dot.Path = "."
		sub = append(sub, dot)
	}
	m := c.in.Manifest
	lo := sort.Search(len(m), func(i int) bool { return m[i].Path >= prefix })
	for k := lo; k < len(m) && strings.HasPrefix(m[k].Path, prefix); k++ {
		e := m[k]
		e.Path = e.Path[len(prefix):]
		sub = append(sub, e)
	}
	slices.SortFunc(sub, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	return &subRepo{head: head, in: &Input{Root: c.in.Root + "/" + rel, GitDir: gd, Manifest: sub, Repo: r, HeadTree: tree, Config: cfg, Env: c.in.Env}}, nil
}

// ResolveHead reads HEAD of a git directory: the branch it names ("" when
// detached) and the commit (zero when the branch has none yet), from loose
// refs or packed-refs.
func ResolveHead(gitDir string) (string, plumbing.Hash, error) {
	data, err := os.ReadFile(gitDir + "/HEAD")
	if err != nil {
		return "", plumbing.ZeroHash, fmt.Errorf("read HEAD: %w", err)
	}
	h := strings.TrimSpace(string(data))
	ref, ok := strings.CutPrefix(h, "ref: ")
	if !ok {
		if !plumbing.IsHash(h) {
			return "", plumbing.ZeroHash, fmt.Errorf("HEAD %q is neither a ref nor a commit", h)
		}
		return "", plumbing.NewHash(h), nil
	}
	branch := strings.TrimPrefix(ref, "refs/heads/")
	common := CommonDir(gitDir)
	for range 10 {
		// Branches are shared; HEAD-like and refs/worktree/ refs are the
		// worktree's own.
		dir := common
		if !strings.HasPrefix(ref, "refs/") || strings.HasPrefix(ref, "refs/worktree/") || strings.HasPrefix(ref, "refs/bisect/") {
			dir = gitDir
		}
		for _, p := range []string{dir + "/" + ref, common + "/packed-refs"} {
			if len(p) >= unix.PathMax {
				// Unreadable for its length, it would pass for unborn.
				return "", plumbing.ZeroHash, fmt.Errorf("resolve %s: %.60s...: %w", ref, p, syscall.ENAMETOOLONG)
			}
		}
		if loose, err := os.ReadFile(dir + "/" + ref); err == nil {
			v := strings.TrimSpace(string(loose))
			if next, sym := strings.CutPrefix(v, "ref: "); sym {
				ref = next
				continue
			}
			if !plumbing.IsHash(v) {
				return "", plumbing.ZeroHash, fmt.Errorf("ref %s holds %q", ref, v)
			}
			return branch, plumbing.NewHash(v), nil
		}
		packed, err := os.ReadFile(common + "/packed-refs")
		if err != nil {
			return branch, plumbing.ZeroHash, nil // unborn
		}
		for _, line := range bytes.Split(packed, []byte("\n")) {
			if hash, name, ok := strings.Cut(string(line), " "); ok && name == ref && plumbing.IsHash(hash) {
				return branch, plumbing.NewHash(hash), nil
			}
		}
		return branch, plumbing.ZeroHash, nil
	}
	return "", plumbing.ZeroHash, fmt.Errorf("symbolic refs nested too deep at %s", ref)
}
