package admission

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/test/heap"
)

// TestCachesDropManagedFields: started, the validators' caches hold juneau's objects
// without their managedFields, their label keys interned.
func TestCachesDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManagerController, Operation: metav1.ManagedFieldsOperationApply}}
	kube := kubefake.NewClientset()
	juneau := fake.NewClientset(
		&v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", ManagedFields: managed,
			Labels: map[string]string{strings.Clone("team"): "a"}}},
		&v1alpha1.ElasticIPAttachment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", ManagedFields: managed}},
		&v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "blue", ManagedFields: managed}})
	kubeInf, juneauInf := kubeinformers.NewSharedInformerFactory(kube, 0), juneauinformers.NewSharedInformerFactory(juneau, 0)
	v, err := New(kube, juneau, kubeInf, juneauInf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait.ForeverTestTimeout)
	defer cancel()
	kubeInf.Start(ctx.Done())
	juneauInf.Start(ctx.Done())
	defer func() { cancel(); kubeInf.Shutdown(); juneauInf.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), v.InformersSynced()...) {
		t.Fatal("caches never synced")
	}
	j := juneauInf.Juneau().V1alpha1()
	for _, inf := range []cache.SharedIndexInformer{j.ElasticIPs().Informer(), j.ElasticIPAttachments().Informer(), j.AddressPools().Informer()} {
		// Synced: the initial list, which holds the object, is in the cache.
		objs := inf.GetStore().List()
		if len(objs) != 1 {
			t.Fatalf("%d objects cached, want 1", len(objs))
		}
		if m, ok := objs[0].(metav1.Object); !ok || m.GetManagedFields() != nil {
			t.Errorf("%T cached with its managedFields", objs[0])
		}
		for k := range objs[0].(metav1.Object).GetLabels() {
			if !heap.Interned(k) {
				t.Errorf("%T cached with its label key %q not interned (cached.Lean)", objs[0], k)
			}
		}
	}
}
