// Package offline answers, with no cluster, what the server would serve and
// refuse had a directory of manifests been applied: each namespace's views,
// the admission guards' answers to an edit, and whether a requester may do
// something. It reuses the server's own code and nothing else: the files'
// namespaces and sources feed a real watchmux.Mux (pkg/merge merges its
// views, pkg/views renders them), the guards of pkg/admission decide edits
// through their own handlers over pkg/admission/whatif's index of that mux,
// and pkg/authz decides access from the files' RBAC objects and the
// inherited RoleBindings.
//
// It reads files only: a directory (ReadDir, symbolic links leaving it
// refused) or a Git tree (ReadGitTree, Git plumbing only); it never runs
// kustomize, Helm or anything the files name. What files can't say is
// stated rather than guessed: a parent is the namespace named (files carry
// no uids); permission-dependent guards are judged for the requester a test
// names, with the files' RBAC. Tests (tests.go) are ImplicitTest documents;
// Diff (diff.go) compares two worlds namespace by namespace.
package offline
