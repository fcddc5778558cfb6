// Package source decides whether a path may serve as the Source Repository of
// a run, and proves with evidence that the run left it untouched.
//
// Classify refuses anything the harness must not work from (remote URLs,
// symlinks, bare repositories, linked worktrees, repositories sharing objects
// through alternates, paths outside the owned roots, and anything inside a
// target repository or external root); a git directory a gitfile names
// outside the worktree (--separate-git-dir) is followed and belongs to the
// source from then on. Prove records the repository state (HEAD, refs,
// status and a full lstat manifest including .git, wherever it is) and
// Compare diffs two such proofs field by field.
//
// The package only reads: it never writes to the source, not even
// .git/index, and it never runs the git CLI (git status may refresh the
// index, which would itself be a mutation) or anything the source
// configures (filters, fsmonitor hooks). Every path it inspects during
// classification is reported to the Tracer first, and paths at or under a
// target or external root are refused before they are touched.
package source
