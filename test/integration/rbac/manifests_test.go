package rbac

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/test/framework"
)

// TestManifestsDryRunServer: the API server (with its admission chain) accepts every
// install manifest, through both documented commands.
func TestManifestsDryRunServer(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t) // a dry run creates no namespace, so the namespaced objects need a real one
	ctx := testContext(t, 2*time.Minute)
	dir := filepath.Join(cp.RepoRoot, "manifests")
	r := cp.Kubectl(ctx, "", "apply", "--dry-run=server", "-k", dir)
	if r.Err != nil {
		t.Fatalf("kubectl apply -k: %v", r.Err)
	}
	for _, want := range []string{"deployment.apps/juneau-controller", "daemonset.apps/juneau-node",
		"deployment.apps/juneau-webhook", "validatingwebhookconfiguration.admissionregistration.k8s.io/juneau-webhook",
		"clusterrole.rbac.authorization.k8s.io/juneau-node", "configmap/juneau-node-scripts"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("kubectl apply -k output lacks %s:\n%s", want, r.Stdout)
		}
	}
	r = cp.Kubectl(ctx, "", "apply", "--dry-run=server", "-f", dir, "-f", filepath.Join(dir, "crds"), "-f", filepath.Join(dir, "webhook"))
	if r.Err != nil {
		t.Fatalf("kubectl apply -f: %v", r.Err)
	}
}

// TestKustomizationCoversEveryFile: `kubectl apply -k manifests/` installs every object
// of every install file, so a file added beside the others cannot be forgotten.
func TestKustomizationCoversEveryFile(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t, time.Minute)
	r := cp.Kubectl(ctx, "", "kustomize", filepath.Join(cp.RepoRoot, "manifests"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	built := map[string]bool{}
	for _, o := range decodeAll(t, "kustomize output", strings.NewReader(r.Stdout)) {
		built[o.id()] = true
	}
	for _, o := range readManifests(t, installFiles(t, cp.RepoRoot)...) {
		if !built[o.id()] {
			t.Errorf("%s from %s is not in manifests/Kustomization", o.id(), o.File)
		}
	}
}

// TestWorkloadsMatchTheBinary: every flag the Deployments and the DaemonSet pass is one
// the role accepts, every $(VAR) they use is defined, every script they run is in the
// mounted ConfigMap, and all of them run the same image.
func TestWorkloadsMatchTheBinary(t *testing.T) {
	cp := framework.Shared(t)
	bin := framework.JuneauBinary(t)
	objs := readManifests(t, installFiles(t, cp.RepoRoot)...)
	var specs []corev1.PodSpec
	for _, o := range objs {
		switch o.Obj.GetKind() {
		case "Deployment":
			specs = append(specs, convert[appsv1.Deployment](t, o).Spec.Template.Spec)
		case "DaemonSet":
			specs = append(specs, convert[appsv1.DaemonSet](t, o).Spec.Template.Spec)
		}
	}
	if len(specs) != 3 {
		t.Fatalf("found %d workloads, want the controller and webhook Deployments and the node DaemonSet", len(specs))
	}
	scripts := convert[corev1.ConfigMap](t, findObject(t, objs, "ConfigMap", "juneau-node-scripts")).Data
	images := map[string]bool{}
	for _, spec := range specs {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			images[c.Image] = true
			checkVariables(t, c)
			if len(c.Command) > 0 {
				checkScript(t, spec, c, scripts)
				continue
			}
			if len(c.Args) == 0 {
				t.Errorf("container %s runs neither a role nor a script", c.Name)
				continue
			}
			// The role's own flag parser judges the arguments: --help after them prints
			// the usage only if every flag before it exists and its value parses.
			out, err := exec.Command(bin, append(slices.Clone(c.Args), "--help")...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Usage:") {
				t.Errorf("container %s: `juneau %s` is refused: %v\n%s", c.Name, strings.Join(c.Args, " "), err, out)
			}
		}
	}
	if len(images) != 1 {
		t.Errorf("the workloads run several images: %v", images)
	}
}

var variableRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkVariables: Kubernetes leaves an undefined $(VAR) in place, silently.
func checkVariables(t *testing.T, c corev1.Container) {
	t.Helper()
	for _, arg := range slices.Concat(c.Command, c.Args) {
		for _, m := range variableRef.FindAllStringSubmatch(arg, -1) {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
				t.Errorf("container %s uses $(%s) without defining it", c.Name, m[1])
			}
		}
	}
}

// checkScript: a script container runs a key of the scripts ConfigMap, mounted where it
// looks for it.
func checkScript(t *testing.T, spec corev1.PodSpec, c corev1.Container, scripts map[string]string) {
	t.Helper()
	if len(c.Command) < 2 || c.Command[0] != "/bin/sh" {
		t.Errorf("container %s: command %v is not a script run by /bin/sh", c.Name, c.Command)
		return
	}
	dir, key := filepath.Split(c.Command[1])
	if _, ok := scripts[key]; !ok {
		t.Errorf("container %s runs %s, which the scripts ConfigMap lacks", c.Name, key)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return filepath.Clean(m.MountPath) == filepath.Clean(dir) && slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == "juneau-node-scripts"
		})
	})
	if !mounted {
		t.Errorf("container %s: the scripts ConfigMap is not mounted at %s", c.Name, dir)
	}
}

// TestUninstallSwitch: the documented uninstall command reaches the install scripts,
// including the init container (kubectl set env covers init containers too).
func TestUninstallSwitch(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ctx := testContext(t, time.Minute)
	// Nothing runs Pods here: the DaemonSet is only an object.
	if r := cp.Kubectl(ctx, "", "apply", "--server-side", "-f", filepath.Join(cp.RepoRoot, "manifests", "30-node.yaml")); r.Err != nil {
		t.Fatal(r.Err)
	}
	r := cp.Kubectl(ctx, "", "-n", framework.NodeNamespace, "set", "env", "daemonset/juneau-node", "--containers=*",
		"JUNEAU_CNI_UNINSTALL=true", "--dry-run=server", "-o", "json")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	objs := decodeAll(t, "kubectl set env", strings.NewReader(r.Stdout))
	if len(objs) != 1 {
		t.Fatalf("kubectl set env printed %d objects", len(objs))
	}
	spec := convert[appsv1.DaemonSet](t, objs[0]).Spec.Template.Spec
	scripts := 0
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if len(c.Command) < 2 || !strings.HasSuffix(c.Command[1], "install-cni.sh") {
			continue
		}
		scripts++
		if !slices.Contains(c.Env, corev1.EnvVar{Name: "JUNEAU_CNI_UNINSTALL", Value: "true"}) {
			t.Errorf("container %s did not get JUNEAU_CNI_UNINSTALL=true: %+v", c.Name, c.Env)
		}
	}
	if scripts != 2 {
		t.Errorf("%d containers run install-cni.sh, want 2 (install-cni and keep-cni)", scripts)
	}
}
