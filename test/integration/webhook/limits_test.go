package webhook

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// networksOf is a networks annotation of n entries.
func networksOf(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`{"interface":"e%d"}`, i)
	}
	return "[" + strings.Join(entries, ",") + "]"
}

// TestAnnotationLimits: the API server refuses, through the webhook, a Pod whose
// networks annotation names more than 16 interfaces or is longer than 4096 bytes, with a
// short message naming the limit; an invalid annotation of 166 KB gets an answer (and a
// webhook log line) of a few KB, not one that quotes it.
func TestAnnotationLimits(t *testing.T) {
	cp := framework.Shared(t)
	wh, _ := runningWebhook(t, cp)
	e := newEnv(t, cp)
	e.forceDeletePodsAtEnd()
	ctx := testContext(t, 2*time.Minute)
	create := func(name, key, value string) error {
		_, err := cp.Kube.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{key: value}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause:1"}}},
		}, metav1.CreateOptions{})
		return err
	}
	logBefore := logSize(t, wh.LogPath)

	invalid := "[" + strings.Repeat(`{"interface":"ext0","elasticIP":"gw-eip",}`, 4000) + "]"
	for _, tc := range []struct {
		name, key, value string
		want             string
	}{
		{"5,000 entries", v1alpha1.AnnotationNetworks, networksOf(5000), "may not be more than 4096"},
		{"166 KB of invalid JSON", v1alpha1.AnnotationNetworks, invalid, "may not be more than 4096"},
		{"17 entries", v1alpha1.AnnotationNetworks, networksOf(17), "must have at most 16 items"},
		{"an ElasticIP name of 166 KB", v1alpha1.AnnotationElasticIP, strings.Repeat("Bad_Name", 166*128), "more bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := create("limits", tc.key, tc.value)
			if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
				t.Fatalf("%d bytes of annotation: err = %v, want a refusal", len(tc.value), err)
			}
			msg := err.Error()
			t.Logf("%d-byte annotation refused with a %d-byte message", len(tc.value), len(msg))
			if len(msg) > 2048 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "metadata.annotations["+tc.key+"]") {
				t.Errorf("message of %d bytes, want under 2 KiB naming the field and saying %q: %.600s", len(msg), tc.want, msg)
			}
		})
	}
	if err := create("sixteen", v1alpha1.AnnotationNetworks, networksOf(16)); err != nil {
		t.Errorf("16 extra interfaces refused: %v", err)
	}
	if grown := logSize(t, wh.LogPath) - logBefore; grown > 16*1024 {
		t.Errorf("the webhook logged %d bytes for five requests", grown)
	}
}

func logSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
