// Command sandbox runs juneau end to end on this machine, as a user would see it: a
// local control plane, two simulated Nodes and an external client in network
// namespaces, the controller, the webhook and a node agent per Node; it applies
// manifests/examples/ and shows the ElasticIPs working.
//
//	sandbox demo   set up, show, check, tear down (exit 0 only when every check held)
//	sandbox up     set up and keep running until SIGINT/SIGTERM (see `sandbox down`)
//	sandbox down   stop a sandbox started with `up`
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/runner"
)

const stateDir = "/run/juneau-sandbox"

func main() {
	mode := "demo"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var err error
	switch mode {
	case "demo", "up":
		err = run(mode == "up")
	case "down":
		err = down()
	case "wait":
		err = waitReady()
	default:
		err = fmt.Errorf("unknown mode %q: use demo, up, wait or down", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// run sets the sandbox up; demo mode checks and tears down, up mode waits for a signal.
func run(keep bool) (err error) {
	r, err := runner.New("sandbox")
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	interrupted := make(chan struct{})
	go func() {
		<-sigs
		close(interrupted)
		if !keep {
			// Ctrl-C in the middle of the demo: tear down now, whatever the main flow does.
			step("Interrupted: tearing down")
			r.Teardown()
			os.Exit(130)
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(runner.Abort)
			if !ok {
				r.Teardown()
				panic(p)
			}
			err = errors.New(f.Msg)
		}
		step("Tearing down")
		r.Teardown()
		framework.RemoveBuiltBinary()
		_ = os.RemoveAll(stateDir)
		if err == nil && r.Failed() {
			err = errors.New("some checks failed")
		}
		if err == nil {
			fmt.Println("Done: nothing of the sandbox is left running.")
		}
	}()

	s := setup(r)
	if !keep {
		s.demo()
		if !r.Failed() {
			step("Every check held: both ElasticIPs are Attached and reachable, and the Pods' traffic leaves with them")
		}
		return nil
	}
	if err := s.writeState(); err != nil {
		return err
	}
	s.printUsage()
	<-interrupted
	return nil
}

// down signals the sandbox started with `up` and waits until it is gone.
func down() error {
	data, err := os.ReadFile(filepath.Join(stateDir, "pid"))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no sandbox is running")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		_ = os.RemoveAll(stateDir)
		return nil // already gone
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			fmt.Println("sandbox stopped")
			return nil
		}
		time.Sleep(200 * time.Millisecond) // polling another process's exit
	}
	return fmt.Errorf("sandbox (pid %d) did not stop within 2 minutes", pid)
}

// waitReady waits until a sandbox started in the background with `up` is ready and
// prints its usage, or reports that it failed.
func waitReady() error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if usage, err := os.ReadFile(filepath.Join(stateDir, "usage")); err == nil {
			fmt.Print(string(usage))
			return nil
		}
		if pid, err := os.ReadFile(filepath.Join(stateDir, "starting")); err == nil {
			if p, _ := strconv.Atoi(strings.TrimSpace(string(pid))); p > 0 && syscall.Kill(p, 0) != nil {
				return errors.New("the sandbox failed to start; see its log")
			}
		}
		time.Sleep(500 * time.Millisecond) // polling another process's progress
	}
	return errors.New("the sandbox did not become ready within 10 minutes")
}
