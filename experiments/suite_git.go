package experiments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Configs on other branches of the artifact
//
// The artifact keeps some protocols on branches of its repository (drrs,
// drrs_q3, skew_mitigation, task_migration) and its suite runner checks
// each entry's Branch out before running it. Here every protocol lives in
// one tree, so a suite never switches branches. But when an entry's config
// is not in the tree, the suite file lies inside a git checkout, and that
// checkout has the entry's branch (a local branch, or a remote-tracking one
// as a fresh clone has), the config is read from the branch with
// `git show <ref>:<path>` (read-only: nothing in the checkout changes) and
// a note says so. Without git, a checkout or the branch, the entry fails
// as before, with a hint on how to put the file in the tree.

// gitTimeout bounds each git command: they read a handful of objects, so
// a longer wait means a hung repository (a lock, a network file system).
const gitTimeout = 20 * time.Second

// gitBranchName is what a suite's Branch may be: a branch name, never an
// option or a revision expression (it reaches git's command line).
var gitBranchName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`)

// gitCheckout is the work tree a suite file lies in.
type gitCheckout struct {
	root string // top-level directory, symlinks resolved
}

// git runs a read-only git command in the checkout and returns its output.
func (c gitCheckout) git(args ...string) ([]byte, error) {
	return runGit(c.root, args...)
}

func runGit(dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if ctx.Err() != nil {
			msg = fmt.Sprintf("no answer within %s", gitTimeout)
		}
		return nil, fmt.Errorf("git %s: %s: %w", strings.Join(args, " "), msg, err)
	}
	return out.Bytes(), nil
}

// findCheckout returns the git checkout dir lies in.
func findCheckout(dir string) (gitCheckout, error) {
	out, err := runGit(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return gitCheckout{}, err
	}
	root, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		return gitCheckout{}, fmt.Errorf("git checkout %s: %w", strings.TrimSpace(string(out)), err)
	}
	return gitCheckout{root: root}, nil
}

// branchRef returns the full name of branch in the checkout: the local
// branch, else a remote-tracking one (origin's first, then by name).
func (c gitCheckout) branchRef(branch string) (string, error) {
	if !gitBranchName.MatchString(branch) || strings.Contains(branch, "..") {
		return "", fmt.Errorf("branch %q is not a branch name (allowed: letters, digits, '.', '_', '-' and '/', not starting with '-' or '.')", branch)
	}
	out, err := c.git("for-each-ref", "--format=%(refname)", "refs/heads/"+branch, "refs/remotes/origin/"+branch, "refs/remotes/*/"+branch)
	if err != nil {
		return "", err
	}
	refs := strings.Fields(string(out))
	for _, prefix := range []string{"refs/heads/", "refs/remotes/origin/", "refs/remotes/"} {
		for _, r := range refs {
			if strings.HasPrefix(r, prefix) && strings.HasSuffix(r, "/"+branch) {
				return r, nil
			}
		}
	}
	return "", fmt.Errorf("the git checkout at %s has no branch %q (neither local nor remote-tracking; `git -C %s fetch` may bring it)", c.root, branch, c.root)
}

// currentBranch is the branch checked out ("" when HEAD is detached).
func (c gitCheckout) currentBranch() string {
	out, err := c.git("symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// relPaths turns paths under the checkout into the slash-separated paths
// git names them by; paths outside it are left out.
func (c gitCheckout) relPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		// The directory may not exist in the tree (the config is not
		// there): resolve symlinks of the nearest directory that does.
		dir, rest := abs, ""
		for {
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				abs = filepath.Join(real, rest)
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			rest = filepath.Join(filepath.Base(dir), rest)
			dir = parent
		}
		rel, err := filepath.Rel(c.root, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// show reads the file at rel (slash-separated, from the checkout's root)
// on ref.
func (c gitCheckout) show(ref, rel string) ([]byte, error) {
	return c.git("show", ref+":"+rel)
}

// firstOnRef returns the first of rels that is a file on ref ("" when none
// is).
func (c gitCheckout) firstOnRef(ref string, rels []string) (string, error) {
	if len(rels) == 0 {
		return "", nil
	}
	out, err := c.git(append([]string{"ls-tree", "--name-only", ref, "--"}, rels...)...)
	if err != nil {
		return "", err
	}
	found := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		found[l] = true
	}
	for _, r := range rels {
		if found[r] {
			return r, nil
		}
	}
	return "", nil
}

// filesOnRef reads the .json files of directory relDir on ref, named
// "<branch>:<path>".
func (c gitCheckout) filesOnRef(ref, branch, relDir string) []configFile {
	out, err := c.git("ls-tree", "--name-only", ref, "--", relDir+"/")
	if err != nil {
		return nil
	}
	var files []configFile
	for _, rel := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path.Ext(rel) != ".json" {
			continue
		}
		if data, err := c.show(ref, rel); err == nil {
			files = append(files, configFile{path: branch + ":" + rel, data: data})
		}
	}
	return files
}

// configOnBranch looks config up on branch of the git checkout the suite
// directory dir lies in, trying the paths findConfig tried in the tree
// (tried). The source's siblings list the files beside it on the branch
// (where its warm-up config is looked for).
func configOnBranch(dir, branch string, tried []string) (configSource, error) {
	c, err := findCheckout(dir)
	if err != nil {
		return configSource{}, fmt.Errorf("the suite file is not inside a git checkout (%w)", err)
	}
	if branch == c.currentBranch() {
		return configSource{}, fmt.Errorf("branch %q is the one checked out at %s, and the file is not in its tree", branch, c.root)
	}
	ref, err := c.branchRef(branch)
	if err != nil {
		return configSource{}, err
	}
	rel, err := c.firstOnRef(ref, c.relPaths(tried))
	if err != nil {
		return configSource{}, err
	}
	if rel == "" {
		return configSource{}, fmt.Errorf("branch %q of the git checkout at %s has no such file either", branch, c.root)
	}
	data, err := c.show(ref, rel)
	if err != nil {
		return configSource{}, err
	}
	relDir := path.Dir(rel)
	return configSource{
		configFile: configFile{path: branch + ":" + rel, data: data},
		siblings:   func() []configFile { return c.filesOnRef(ref, branch, relDir) },
	}, nil
}

// locateConfig finds a suite entry's config: in the tree (findConfig),
// else on the entry's branch of the git checkout the suite lies in.
func locateConfig(dir, config, branch string) (configSource, error) {
	p, tried := findConfig(dir, config)
	if p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return configSource{}, fmt.Errorf("config: %w", err)
		}
		return configSource{configFile: configFile{path: p, data: data}}, nil
	}
	missing := fmt.Sprintf("config file %s does not exist (paths are relative to the suite file's directory %s, or a directory above it: looked in %s)", config, dir, abbreviate(tried, 3))
	if branch == "" {
		return configSource{}, errors.New(missing)
	}
	src, err := configOnBranch(dir, branch, tried)
	if err != nil {
		return configSource{}, fmt.Errorf("%s; the artifact keeps it on branch %q, and reading it from there failed: %w. Every protocol lives in one tree here: run the suite from a git checkout of the artifact that has branch %q (e.g. `git clone <artifact>`), or put the file in the tree (e.g. `git -C <artifact checkout> show %s:scripts/%s > <artifact>/scripts/%s`)",
			missing, branch, err, branch, branch, config, config)
	}
	return src, nil
}
