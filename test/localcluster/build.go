package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

const (
	modulePath  = "github.com/llamastack/llama-stack-controller"
	buildScript = "hack/cluster/build.sh"
	stagesName  = "kwok-stages.yaml"
)

// BuildBinaries runs hack/cluster/build.sh, which builds the control-plane
// binaries into a cache dir outside the repository (or finds them there, in
// a few seconds), and returns the bin dir and the kwok stages file for
// Options. The script's log goes to stderr; the first build takes about ten
// minutes.
func BuildBinaries(ctx context.Context) (binDir, stagesFile string, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = buildSysProcAttr()
	cmd.Cancel = func() error { return terminateGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("localcluster: %s: %w", buildScript, err)
	}
	binDir = lastLine(stdout.String())
	if binDir == "" {
		return "", "", fmt.Errorf("localcluster: %s printed no bin dir", buildScript)
	}
	stagesFile = filepath.Join(filepath.Dir(binDir), stagesName)
	if _, err := os.Stat(stagesFile); err != nil {
		return "", "", fmt.Errorf("localcluster: %s: %w", buildScript, err)
	}
	return binDir, stagesFile, nil
}

func lastLine(s string) string {
	last := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	return last
}

// ModuleRoot returns the root directory of the controller's module: the
// nearest directory at or above the working directory (or, failing that,
// this source file) whose go.mod declares the module and that holds
// hack/cluster/build.sh.
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if isModuleRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("localcluster: cannot find the root of module " + modulePath + " (run from inside the repository)")
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			if strings.Trim(fields[1], `"`) != modulePath {
				return false
			}
			_, err := os.Stat(filepath.Join(dir, buildScript))
			return err == nil
		}
	}
	return false
}
