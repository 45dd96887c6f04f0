// Command sandbox runs juneau on a real two-Node Kubernetes cluster on this machine
// (test/cluster), installed as the README says, and shows the ElasticIPs working from
// an external client.
//
//	sandbox demo [-cni ptp|flannel]
//	                    start, install, apply manifests/examples (and its ipv6/), check,
//	                    tear down (exit 0 only when every check held and nothing was
//	                    left behind)
//	sandbox up [-cni ptp|flannel]
//	                    the same cluster kept running until SIGINT/SIGTERM
//	sandbox wait -pid P wait until the sandbox `up` (process P) is ready, print how to use it
//	sandbox down        stop the sandboxes of this clone, whatever state they are in
//
// Every run has its own directory; a demo can run while a sandbox is up.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/framework"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox demo [-cni CNI] | up [-cni CNI] | wait -pid PID | down")
		os.Exit(2)
	}
	root, err := framework.RepoRoot()
	if err == nil {
		switch mode := os.Args[1]; mode {
		case "demo", "up":
			fs := flag.NewFlagSet(mode, flag.ExitOnError)
			cni := fs.String("cni", cluster.CNIPtp, "primary CNI of the cluster: "+strings.Join(cluster.CNIs, " or "))
			_ = fs.Parse(os.Args[2:])
			err = run(root, mode == "up", *cni)
		case "wait":
			fs := flag.NewFlagSet("wait", flag.ExitOnError)
			pid := fs.Int("pid", 0, "process id of `sandbox up`")
			log := fs.String("log", "", "output of `sandbox up`, shown if it fails")
			_ = fs.Parse(os.Args[2:])
			err = waitReady(root, *pid, *log)
		case "down":
			err = down(root)
		default:
			err = fmt.Errorf("unknown mode %q: use demo, up, wait or down", mode)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// run starts the cluster and installs juneau; demo mode checks and tears down, up mode
// serves until a signal. A signal during the start tears down at once.
func run(root string, keep bool, cni string) (err error) {
	kind := "demo"
	if keep {
		kind = "sandbox"
		if err := refuseSecondSandbox(root); err != nil {
			return err
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	started := time.Now()
	var built []string // binaries built here, not by make
	defer func() {
		for _, d := range built {
			_ = os.RemoveAll(d)
		}
	}()
	s, err := start(ctx, root, kind, cni, &built)
	if s != nil {
		defer func() {
			step("Tearing down")
			if terr := s.c.Stop(); terr != nil {
				err = errors.Join(err, terr)
			} else {
				fmt.Printf("    nothing of the cluster is left (its directory %s is gone); logs: %s\n", s.c.Dir, logDir(root, kind))
			}
		}()
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		return err
	}
	if keep {
		return s.serve(ctx, started)
	}
	s.demo(ctx)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if s.failed {
		return errors.New("some checks failed")
	}
	step("Every check held: the four ElasticIPs, IPv4 and IPv6, by NAT and directly, are Attached, their Pods Ready, reachable from outside, and the Pods' traffic leaves with them (%s)", time.Since(started).Round(time.Second))
	return nil
}

// logDir is where a run's logs are kept after its teardown.
func logDir(root, kind string) string {
	return filepath.Join(root, "_output", kind+"-logs")
}

// refuseSecondSandbox refuses to start a sandbox while another of this clone runs.
func refuseSecondSandbox(root string) error {
	runs, err := cluster.Runs(root)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Kind == "sandbox" && r.Owner.Alive() {
			return fmt.Errorf("a sandbox of this clone is already running (process %d, directory %s, since %s); use it (kubeconfig %s) or stop it with make sandbox-down",
				r.Owner.PID, r.Dir, r.Started.Format(time.TimeOnly), filepath.Join(r.Dir, "kubeconfig"))
		}
	}
	return nil
}

// waitReady waits until the sandbox started by process pid is ready and prints its
// usage, or the end of its output if it failed.
func waitReady(root string, pid int, log string) error {
	deadline := time.Now().Add(20 * time.Minute)
	for time.Now().Before(deadline) {
		runs, err := cluster.Runs(root)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Kind != "sandbox" || r.Owner.PID != pid {
				continue
			}
			if usage, err := os.ReadFile(filepath.Join(r.Dir, "usage")); err == nil {
				fmt.Print(string(usage))
				if log != "" {
					fmt.Printf("The sandbox's own output: %s\n", log)
				}
				return nil
			}
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
			out, _ := os.ReadFile(log)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			return fmt.Errorf("the sandbox failed to start (all its output: %s):\n%s", log, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
		time.Sleep(500 * time.Millisecond) // polling another process's progress
	}
	return errors.New("the sandbox did not become ready within 20 minutes")
}

// down stops every sandbox of this clone: it asks a running one to tear itself down,
// and tears down from its directory one whose process is gone (or did not finish).
func down(root string) error {
	runs, err := cluster.Runs(root)
	if err != nil {
		return err
	}
	var problems []error
	found := 0
	for _, r := range runs {
		if r.Kind != "sandbox" {
			continue
		}
		found++
		if r.Owner.Alive() {
			_ = syscall.Kill(r.Owner.PID, syscall.SIGTERM)
			deadline := time.Now().Add(2 * time.Minute)
			for r.Owner.Alive() && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond) // polling another process's exit
			}
		}
		if r.Owner.Alive() {
			problems = append(problems, fmt.Errorf("sandbox process %d did not stop within 2 minutes", r.Owner.PID))
			continue
		}
		// Its own teardown removed the directory, unless it was killed or failed.
		if err := cluster.Teardown(r.Dir); err != nil {
			problems = append(problems, err)
			continue
		}
		fmt.Printf("sandbox %s stopped; nothing of it is left (logs: %s)\n", r.Dir, logDir(root, "sandbox"))
	}
	if found == 0 {
		fmt.Println("no sandbox of this clone is running")
	}
	return errors.Join(problems...)
}

func indent(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

func orError(s string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}
