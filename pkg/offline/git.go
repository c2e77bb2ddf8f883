package offline

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strconv"
	"strings"
)

// ReadGitTree reads the manifest files under dir of the tree of ref, in
// the Git repository at repo, with Git's plumbing (ls-tree, cat-file): no
// checkout, nothing in the work tree changes and nothing from the tree
// runs. dir is relative to the repository's top ("" or "." for all of it).
// A ref the repository doesn't have (a shallow clone without the base
// branch) is an error that says how to fetch it. Symbolic links in the tree
// are refused, as ReadDir refuses those that leave its directory: a tree's
// link can't be resolved without a checkout.
func ReadGitTree(ctx context.Context, repo, ref, dir string) ([]File, error) {
	commit, err := git(ctx, repo, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		msg := fmt.Sprintf("git ref %q is not in the repository at %s", ref, repo)
		if shallow, _ := git(ctx, repo, nil, "rev-parse", "--is-shallow-repository"); strings.TrimSpace(string(shallow)) == "true" {
			msg += " (a shallow clone: fetch the ref first, e.g. git fetch --depth=1 origin " + strings.TrimPrefix(ref, "origin/") + ")"
		}
		return nil, fmt.Errorf("%s", msg)
	}
	rev := strings.TrimSpace(string(commit))
	dir = strings.Trim(path.Clean("/"+dir), "/")
	args := []string{"ls-tree", "-r", "-z", "--full-tree", rev}
	if dir != "" {
		args = append(args, "--", dir)
	}
	listing, err := git(ctx, repo, nil, args...)
	if err != nil {
		return nil, err
	}
	type entry struct{ path, object string }
	var entries []entry
	for _, line := range bytes.Split(listing, []byte{0}) {
		if len(line) == 0 {
			continue
		}
		meta, name, ok := bytes.Cut(line, []byte{'\t'})
		fields := strings.Fields(string(meta))
		if !ok || len(fields) != 3 {
			return nil, fmt.Errorf("git ls-tree: unexpected line %q", line)
		}
		p := string(name)
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if hidden(rel) || !manifest(p) || notBuilt(p) {
			continue
		}
		switch {
		case fields[0] == "120000":
			return nil, fmt.Errorf("%s:%s: a symbolic link: refused (read the directory it points to instead)", ref, p)
		case fields[1] != "blob":
			continue // a submodule
		}
		entries = append(entries, entry{path: rel, object: fields[2]})
	}
	if len(entries) == 0 {
		if _, err := git(ctx, repo, nil, "cat-file", "-e", rev+":"+dir); dir != "" && err != nil {
			return nil, fmt.Errorf("%s:%s: no such directory in that commit", ref, dir)
		}
		return nil, nil
	}
	var in bytes.Buffer
	for _, e := range entries {
		in.WriteString(e.object + "\n")
	}
	blobs, err := git(ctx, repo, &in, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(bytes.NewReader(blobs))
	out := make([]File, 0, len(entries))
	for _, e := range entries {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file: %s: %q", e.path, strings.TrimSpace(header))
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", e.path, err)
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", e.path, err)
		}
		if _, err := r.ReadByte(); err != nil { // the newline after each object
			return nil, fmt.Errorf("git cat-file: %s: %w", e.path, err)
		}
		out = append(out, File{Path: e.path, Data: data})
	}
	return out, nil
}

// hidden reports whether a path is under a hidden directory, as ReadDir
// skips them.
func hidden(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		if strings.HasPrefix(p, ".") {
			return true
		}
	}
	return false
}

// GitTop returns the top of the Git work tree holding dir.
func GitTop(ctx context.Context, dir string) (string, error) {
	out, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// git runs git in repo with stdin and returns its output. Hooks, pagers
// and the user's external tools never run: plumbing commands call none, and
// GIT_CONFIG_NOSYSTEM keeps system configuration out.
func git(ctx context.Context, repo string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo, "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Env = append(cmd.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
