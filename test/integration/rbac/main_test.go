// Package rbac tests the installable manifests against a real etcd + kube-apiserver:
// every manifest passes a server-side dry run, each component's ServiceAccount may do
// what the component does and nothing it must not, `juneau controller` works with only
// its own credentials, and the node DaemonSet's install scripts do what they claim.
package rbac

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/loutres/juneau/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// manifestObject is one document of a manifest file.
type manifestObject struct {
	File string
	Obj  *unstructured.Unstructured
}

func (o manifestObject) id() string {
	return o.Obj.GetKind() + " " + o.Obj.GetNamespace() + "/" + o.Obj.GetName()
}

// readManifests decodes every document of the given files.
func readManifests(t *testing.T, files ...string) []manifestObject {
	t.Helper()
	var out []manifestObject
	for _, f := range files {
		data, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeAll(t, f, data)...)
		data.Close()
	}
	return out
}

func decodeAll(t *testing.T, name string, r io.Reader) []manifestObject {
	t.Helper()
	var out []manifestObject
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding %s: %v", name, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, manifestObject{File: name, Obj: &unstructured.Unstructured{Object: m}})
	}
}

// installFiles are the files `kubectl apply -f` reads from manifests/ and the two
// directories the install includes (examples are not part of the install).
func installFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"manifests", "manifests/crds", "manifests/webhook"} {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d manifest files found under %s/manifests", len(files), root)
	}
	return files
}

// findObject returns the object of that kind and name, failing the test without it.
func findObject(t *testing.T, objs []manifestObject, kind, name string) manifestObject {
	t.Helper()
	for _, o := range objs {
		if o.Obj.GetKind() == kind && o.Obj.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %q in the manifests", kind, name)
	return manifestObject{}
}

// convert turns an unstructured manifest object into a typed one.
func convert[T any](t *testing.T, o manifestObject) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Obj.Object, out, true); err != nil {
		t.Fatalf("%s in %s: %v", o.id(), o.File, err)
	}
	return out
}

// access is one question to the authorizer: may the caller <verb> <resource>?
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	return s
}

// checkAccess asks the API server, as the caller of kube, each question and fails the
// test for every answer that differs from want.
func checkAccess(t *testing.T, kube kubernetes.Interface, want bool, questions []access) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	for _, q := range questions {
		review, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: q.verb, Group: q.group, Resource: q.resource, Subresource: q.subresource,
				Namespace: q.namespace, Name: q.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("asking %q: %v", q, err)
		}
		if review.Status.Allowed != want {
			t.Errorf("may %s: allowed=%v, want %v (%s)", q, review.Status.Allowed, want,
				strings.TrimSpace(review.Status.Reason+" "+review.Status.EvaluationError))
		}
	}
}

// juneau builds access questions about the juneau.loutres.me group.
func juneau(verb, resource string) access {
	res, sub, _ := strings.Cut(resource, "/")
	return access{verb: verb, group: "juneau.loutres.me", resource: res, subresource: sub}
}

// core builds access questions about the core group.
func core(verb, resource string) access {
	res, sub, _ := strings.Cut(resource, "/")
	return access{verb: verb, resource: res, subresource: sub}
}

// metricsReviews are the reviews every component makes to guard its /metrics
// (manifests/10-rbac-metrics.yaml).
var metricsReviews = []access{
	{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
	{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
}

// every asks the same resource with several verbs.
func every(build func(verb, resource string) access, resource string, verbs ...string) []access {
	out := make([]access, len(verbs))
	for i, v := range verbs {
		out[i] = build(v, resource)
	}
	return out
}
