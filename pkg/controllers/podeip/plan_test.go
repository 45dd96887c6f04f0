package podeip

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// world is the content of the caches for one Pod key.
type world struct {
	name     string // the key's name; defaults to the Pod's
	pod      *corev1.Pod
	eips     []*v1alpha1.ElasticIP
	atts     []*v1alpha1.ElasticIPAttachment
	nics     []*v1alpha1.NetworkInterface
	networks []*v1alpha1.ExternalNetwork
	kinds    []schema.GroupKind
}

// inputs reads the world as Controller.read reads the caches.
func (w world) inputs(now time.Time) inputs {
	name := w.name
	if name == "" {
		name = w.pod.Name
	}
	in := inputs{Namespace: testNS, Name: name, Pod: w.pod, Now: now, Networks: w.networks}
	in.State, in.Auto, in.Problem = classify(w.pod)
	in.Stateful = isStateful(w.pod, w.kinds)
	find := func(n string) *v1alpha1.ElasticIP {
		if i := slices.IndexFunc(w.eips, func(e *v1alpha1.ElasticIP) bool { return e.Name == n }); i >= 0 {
			return w.eips[i]
		}
		return nil
	}
	for _, n := range w.nics {
		if w.pod != nil && n.Name == name+".eth0" {
			in.NIC = n
		}
	}
	active := in.State == podActive
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		s := slot{Family: f, Name: slotName(name, f)}
		s.Wants = active && in.Auto.Enabled && slices.Contains(in.Auto.IPFamilies(), f)
		if active && f == v1alpha1.IPv4 {
			s.Named = in.Auto.ElasticIPName
			if s.Named != "" {
				s.NamedEIP = find(s.Named)
			}
		}
		s.OwnEIP = find(s.Name)
		var targetAtts []*v1alpha1.ElasticIPAttachment
		for _, a := range w.atts {
			if a.Name == s.Name {
				s.Attachment = a
			}
			if s.OwnEIP != nil && a.Spec.ElasticIPRef.Name == s.Name && a.DeletionTimestamp == nil && !(a.Name == s.Name && labelledFor(a, name)) {
				s.Blockers = append(s.Blockers, a.Name)
			}
			if a.Spec.ElasticIPRef.Name == s.target() {
				targetAtts = append(targetAtts, a)
			}
		}
		if active && s.active() {
			a := s.Attachment
			own := a != nil && isOwnAttachment(a, s.Name, name) && a.DeletionTimestamp == nil && a.Spec.ElasticIPRef.Name == s.target() && !ownedByEarlierPod(a, w.pod)
			s.Yield = own && s.Named != "" && olderAttachment(a, targetAtts)
			if !own || s.Yield {
				for _, o := range targetAtts {
					if o.DeletionTimestamp == nil && !labelledFor(o, name) {
						s.Others = append(s.Others, holder.AttachmentUser(o, holder.PodOf(o)))
					}
				}
				for _, n := range w.nics {
					if n.Spec.ElasticIP == s.target() {
						s.Others = append(s.Others, holder.DirectUser(n))
					}
				}
			}
		}
		in.Slots = append(in.Slots, s)
	}
	return in
}

func TestPlanPod(t *testing.T) {
	web := newPod("web", withEIP("ext-net"))
	webDefault := newPod("web", withEIP(""))
	webBW := newPod("web", withEIP("ext-net", v1alpha1.AnnotationEIPBandwidth, "50"))
	webNever := newPod("web", withEIP("ext-net", v1alpha1.AnnotationReleaseStrategy, "Never"))
	webAlias := newPod("web", auto(v1alpha1.AliasPodWithEIP, "true", v1alpha1.AliasEIPBandwidth, "5"))
	web2 := newPod("web", withEIP("ext-net"), withUID("uid-web-2"))
	sts := newPod("db-0", withEIP("ext-net"), ownedBy("apps/v1", "StatefulSet"))
	named := newPod("app", auto(v1alpha1.AnnotationPodEIPName, "shared"))
	namedAlias := newPod("app", auto(v1alpha1.AliasPodEIPInstance, "shared"))
	plain := newPod("web", nil)
	gatedWeb := newPod("web", withEIP("ext-net"), settingUp, gate(corev1.ConditionFalse))
	gateTrue := newPod("web", withEIP("ext-net"), settingUp, gate(corev1.ConditionTrue))
	gatedWithIP := newPod("web", withEIP("ext-net"), gate(corev1.ConditionFalse))
	gatedStale := newPod("web", withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.9"),
		settingUp, gate(""))
	mark := t0.Add(-5 * time.Minute).Format(time.RFC3339)
	oldMark := t0.Add(-11 * time.Minute).Format(time.RFC3339)
	nets := []*v1alpha1.ExternalNetwork{network("ext-net", false), network("dflt", true)}

	tests := []struct {
		name string
		w    world
		want []string
	}{
		// Allocation.
		{name: "new Pod: ElasticIP from the named network", w: world{pod: web, networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=Follow owner=uid-web"}},
		{name: "new Pod: ElasticIP from the default network", w: world{pod: webDefault, networks: nets},
			want: []string{"create eip web network=dflt label=web strategy=Follow owner=uid-web"}},
		{name: "bandwidth", w: world{pod: webBW, networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=Follow owner=uid-web bw=50"}},
		{name: "alias annotations only", w: world{pod: webAlias, networks: nets},
			want: []string{"create eip web network=dflt label=web strategy=Follow owner=uid-web bw=5"}},
		{name: "Never: no owner", w: world{pod: webNever, networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=Never owner=-"}},
		{name: "StatefulSet: 10m, no owner", w: world{pod: sts, networks: nets},
			want: []string{"create eip db-0 network=ext-net label=db-0 strategy=10m0s owner=-"}},
		{name: "created directly: 10m, no owner", w: world{pod: newPod("web", withEIP("ext-net"), ownerless), networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=10m0s owner=-"}},
		{name: "created directly, Follow asked for", w: world{pod: newPod("web", withEIP("ext-net", v1alpha1.AnnotationReleaseStrategy, "Follow"), ownerless), networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=Follow owner=uid-web"}},
		{name: "named network missing", w: world{pod: web, networks: nets[1:]},
			want: []string{"problem " + v1alpha1.EventExternalNetworkNotFound}},
		{name: "no default network", w: world{pod: webDefault, networks: nets[:1]},
			want: []string{"problem " + v1alpha1.EventNoDefaultNetwork}},
		{name: "two default networks", w: world{pod: webDefault, networks: append(nets, network("other", true))},
			want: []string{"problem " + v1alpha1.EventAmbiguousDefaultNetwork}},

		// Attachment and write-back.
		{name: "ElasticIP there, NIC missing: wait", w: world{pod: web, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}}},
		{name: "ElasticIP and NIC there: attach", w: world{pod: web, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"create attachment web eip=web nic=web.eth0 label=web owner=uid-web"}},
		{name: "NIC of an earlier Pod: wait", w: world{pod: web2, eips: []*v1alpha1.ElasticIP{ownEIP(web2, "Follow")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}}},
		{name: "held: write back", w: world{pod: web, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), heldBy(ownAttachment(web, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"annotate web 10.225.51.5"}},
		{name: "held, gated Pod being set up: written back once its gate is True", w: world{pod: gatedWeb,
			eips: []*v1alpha1.ElasticIP{ownEIP(gatedWeb, "Follow", address("10.225.51.5"), heldBy(ownAttachment(gatedWeb, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(gatedWeb, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(gatedWeb)}}},
		{name: "held, gated Pod, gate True: write back", w: world{pod: gateTrue,
			eips: []*v1alpha1.ElasticIP{ownEIP(gateTrue, "Follow", address("10.225.51.5"), heldBy(ownAttachment(gateTrue, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(gateTrue, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(gateTrue)}},
			want: []string{"annotate web 10.225.51.5"}},
		{name: "held, gated Pod with its IP reported, gate False: write back", w: world{pod: gatedWithIP,
			eips: []*v1alpha1.ElasticIP{ownEIP(gatedWithIP, "Follow", address("10.225.51.5"), heldBy(ownAttachment(gatedWithIP, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(gatedWithIP, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(gatedWithIP)}},
			want: []string{"annotate web 10.225.51.5"}},
		{name: "gated Pod being set up carrying another address: changed at once", w: world{pod: gatedStale,
			eips: []*v1alpha1.ElasticIP{ownEIP(gatedStale, "Follow", address("10.225.51.5"), heldBy(ownAttachment(gatedStale, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(gatedStale, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(gatedStale)}},
			want: []string{"annotate web 10.225.51.5"}},
		{name: "gated Pod being set up, no longer asking: removed at once", w: world{
			pod: newPod("web", auto(v1alpha1.AnnotationPodWithEIP, "false", v1alpha1.AnnotationAllocatedEIPName, "web"), settingUp, gate(""))},
			want: []string{"remove 7 annotations"}},
		{name: "an address, but the attachment not picked yet: nothing written back", w: world{pod: web,
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}}},
		{name: "an address, no attachment yet: nothing written back", w: world{pod: webAlias,
			eips: []*v1alpha1.ElasticIP{ownEIP(webAlias, "Follow", address("10.225.51.5"), bandwidth(5))}}},
		{name: "managed-cloud keys: their names written back too", w: world{pod: webAlias,
			eips: []*v1alpha1.ElasticIP{ownEIP(webAlias, "Follow", address("10.225.51.5"), bandwidth(5), heldBy(ownAttachment(webAlias, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(webAlias, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(webAlias)}},
			want: []string{"annotate managed-cloud web 10.225.51.5 web.eth0", "annotate web 10.225.51.5"}},
		{name: "managed-cloud keys written back already: nothing", w: world{
			pod: newPod("web", auto(v1alpha1.AliasPodWithEIP, "true", v1alpha1.AliasEIPBandwidth, "5",
				v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5",
				v1alpha1.AliasAllocatedEIPID, "web", v1alpha1.AliasAllocatedEIPAddress, "10.225.51.5", v1alpha1.AliasAllocatedENIID, "web.eth0")),
			eips: []*v1alpha1.ElasticIP{ownEIP(webAlias, "Follow", address("10.225.51.5"), bandwidth(5), heldBy(ownAttachment(webAlias, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(webAlias, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(webAlias)}}},
		{name: "managed-cloud instance id: the named ElasticIP's names", w: world{pod: namedAlias,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"), heldBy(ownAttachment(namedAlias, "shared")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(namedAlias, "shared")}, nics: []*v1alpha1.NetworkInterface{nicOf(namedAlias)}},
			want: []string{"annotate managed-cloud shared 10.225.51.9 app.eth0", "annotate shared 10.225.51.9"}},
		{name: "no longer asking: every written-back key removed", w: world{
			pod: newPod("web", auto(v1alpha1.AliasPodWithEIP, "false", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AliasAllocatedEIPID, "web"))},
			want: []string{"remove 7 annotations"}},
		{name: "written back already: nothing", w: world{
			pod:  newPod("web", withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), heldBy(ownAttachment(web, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}}},
		{name: "written back, the ElasticIP moved on to another user: removed", w: world{
			pod:  newPod("web", withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), heldBy(userAttachment("mine", "web", "x.eth0")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web"), userAttachment("mine", "web", "x.eth0")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"remove 7 annotations"}},
		{name: "bandwidth changed: update", w: world{pod: webBW, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}},
			want: []string{"update eip web label=web strategy=Follow owner=uid-web bw=50"}},
		{name: "bandwidth set on the ElasticIP, no annotation: it stands", w: world{
			pod:  newPod("web", withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), bandwidth(5), heldBy(ownAttachment(web, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}}},
		{name: "strategy changed to Never: owner dropped", w: world{pod: webNever, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}},
			want: []string{"update eip web label=web strategy=Never owner=-"}},

		// Never taking over.
		{name: "user ElasticIP of the wanted name", w: world{pod: web, eips: []*v1alpha1.ElasticIP{userEIP("web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"problem " + v1alpha1.EventElasticIPNameTaken}},
		{name: "ElasticIP labelled for another Pod", w: world{pod: web, eips: []*v1alpha1.ElasticIP{userEIP("web", func(e *v1alpha1.ElasticIP) {
			e.Labels = map[string]string{v1alpha1.LabelPod: "other"}
		})}}, want: []string{"problem " + v1alpha1.EventElasticIPNameTaken}},
		{name: "user attachment of the wanted name", w: world{pod: web, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{userAttachment("web", "x", "y.eth0")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"problem " + v1alpha1.EventAttachmentNameTaken}},
		{name: "user objects left alone when the Pod is gone", w: world{name: "web", eips: []*v1alpha1.ElasticIP{userEIP("web")},
			atts: []*v1alpha1.ElasticIPAttachment{userAttachment("web", "web", "x.eth0")}}},

		// Leaving.
		{name: "gone, Follow: attachment first", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}}, want: []string{"delete attachment web"}},
		{name: "gone, Follow: then the ElasticIP", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}},
			want: []string{"delete eip web"}},
		{name: "gone, Follow, another attachment holds it", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{userAttachment("mine", "web", "x.eth0")}}, want: []string{"problem " + v1alpha1.EventReleaseBlocked}},
		{name: "gone, Never: kept", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "Never")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}}, want: []string{"delete attachment web"}},
		{name: "gone, 10m: mark and wait", w: world{name: "db-0", eips: []*v1alpha1.ElasticIP{ownEIP(sts, "10m0s")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(sts, "db-0")}},
			want: []string{"delete attachment db-0", "requeue 10m0s", "update eip db-0 label=db-0 strategy=10m0s owner=- gone=2026-03-04T05:06:07Z"}},
		{name: "gone, 10m, marked 5m ago: wait", w: world{name: "db-0", eips: []*v1alpha1.ElasticIP{ownEIP(sts, "10m0s", goneSince(mark))}},
			want: []string{"requeue 5m0s"}},
		{name: "gone, 10m, marked 11m ago: release", w: world{name: "db-0", eips: []*v1alpha1.ElasticIP{ownEIP(sts, "10m0s", goneSince(oldMark))}},
			want: []string{"delete eip db-0"}},
		{name: "gone, strategy unreadable: kept", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "soon")}}},
		{name: "finished: detach and release", w: world{pod: newPod("web", withEIP("ext-net"), phase(corev1.PodSucceeded)),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}},
			want: []string{"delete attachment web"}},
		{name: "finished: its address annotations go too", w: world{pod: newPod("web",
			withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5"), phase(corev1.PodSucceeded)),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), heldBy(ownAttachment(web, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}},
			want: []string{"delete attachment web", "remove 7 annotations"}},
		{name: "terminating: address annotations kept while it holds the address", w: world{pod: newPod("web",
			withEIP("ext-net", v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5"), terminating),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", address("10.225.51.5"), heldBy(ownAttachment(web, "web")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}}},
		{name: "failed, no attachment: release", w: world{pod: newPod("web", withEIP("ext-net"), phase(corev1.PodFailed)),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}}, want: []string{"delete eip web"}},
		{name: "stops asking: detach, release, unannotate", w: world{
			pod:  newPod("web", auto(v1alpha1.AnnotationAllocatedEIPName, "web", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.5")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}},
			want: []string{"delete attachment web", "remove 7 annotations"}},
		{name: "plain Pod without objects: nothing", w: world{pod: plain}},
		{name: "terminating: everything stays", w: world{pod: newPod("web", withEIP("ext-net"), terminating),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}}},
		{name: "unreadable annotations: everything stays", w: world{pod: newPod("web", withEIP("ext-net", v1alpha1.AnnotationEIPBandwidth, "lots")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}}},
		{name: "deleting ElasticIP: wait for it to go", w: world{pod: web, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow", eipDeleting)},
			nics: []*v1alpha1.NetworkInterface{nicOf(web)}, networks: nets}},

		// Same name again.
		{name: "Pod created directly, back under its name: its ElasticIP again", w: world{pod: newPod("web", withEIP("ext-net"), ownerless, withUID("uid-web-2")),
			eips: []*v1alpha1.ElasticIP{ownEIP(newPod("web", nil, ownerless), "10m0s", goneSince(mark), address("10.225.51.5"))},
			nics: []*v1alpha1.NetworkInterface{nicOf(newPod("web", nil, withUID("uid-web-2")))}},
			want: []string{"create attachment web eip=web nic=web.eth0 label=web owner=uid-web-2",
				"update eip web label=web strategy=10m0s owner=-"}},
		{name: "StatefulSet Pod back: mark cleared, attached again", w: world{pod: newPod("db-0", withEIP("ext-net"), ownedBy("apps/v1", "StatefulSet"), withUID("uid-db-0-2")),
			eips: []*v1alpha1.ElasticIP{ownEIP(sts, "10m0s", goneSince(mark))},
			nics: []*v1alpha1.NetworkInterface{nicOf(newPod("db-0", nil, withUID("uid-db-0-2")))}},
			want: []string{"create attachment db-0 eip=db-0 nic=db-0.eth0 label=db-0 owner=uid-db-0-2", "update eip db-0 label=db-0 strategy=10m0s owner=-"}},
		{name: "attachment of the earlier Pod: made again", w: world{pod: web2, eips: []*v1alpha1.ElasticIP{ownEIP(web2, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(web2)}},
			want: []string{"delete attachment web"}},
		{name: "Follow ElasticIP of the earlier Pod: released first", w: world{pod: web2, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")}, networks: nets},
			want: []string{"delete attachment web"}},
		{name: "Follow ElasticIP of the earlier Pod, detached: deleted", w: world{pod: web2, eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, networks: nets},
			want: []string{"delete eip web"}},

		// pod-eip-name.
		{name: "named ElasticIP: attach it (written back once it picks the attachment)", w: world{pod: named, eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"))},
			nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"create attachment app eip=shared nic=app.eth0 label=app owner=uid-app"}},
		{name: "named ElasticIP attached to another Pod: wait, told why", w: world{pod: named,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"), heldBy(ownAttachment(newPod("nginx", nil), "shared")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(newPod("nginx", nil), "shared")}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.ReasonElasticIPInUse}},
		{name: "named ElasticIP attached by a user's attachment: wait", w: world{pod: named,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"))},
			atts: []*v1alpha1.ElasticIPAttachment{userAttachment("shared-attach", "shared", "nginx.eth0")}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.ReasonElasticIPInUse}},
		{name: "named ElasticIP used directly by another Pod: wait", w: world{pod: named,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"))},
			nics: []*v1alpha1.NetworkInterface{nicOf(named), func() *v1alpha1.NetworkInterface {
				n := nicOf(newPod("direct", nil))
				n.Spec.ElasticIP = "shared"
				return n
			}()}},
			want: []string{"problem " + v1alpha1.ReasonElasticIPInUse}},
		{name: "named ElasticIP used by another Pod, address annotations of it written earlier: removed", w: world{
			pod:  newPod("app", auto(v1alpha1.AnnotationPodEIPName, "shared", v1alpha1.AnnotationAllocatedEIPName, "shared", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.9")),
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"), heldBy(ownAttachment(newPod("nginx", nil), "shared")))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(newPod("nginx", nil), "shared")}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.ReasonElasticIPInUse, "remove 7 annotations"}},
		{name: "two attachments of a named ElasticIP: the younger gives way", w: world{pod: named,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"))},
			atts: []*v1alpha1.ElasticIPAttachment{younger(ownAttachment(named, "shared")), ownAttachment(newPod("nginx", nil), "shared")},
			nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"delete attachment app", "problem " + v1alpha1.ReasonElasticIPInUse}},
		{name: "two attachments of a named ElasticIP: the older stays", w: world{pod: named,
			eips: []*v1alpha1.ElasticIP{userEIP("shared", address("10.225.51.9"))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(named, "shared"), younger(ownAttachment(newPod("nginx", nil), "shared"))},
			nics: []*v1alpha1.NetworkInterface{nicOf(named)}}},
		{name: "named ElasticIP deleted: its address annotations go", w: world{
			pod:  newPod("app", auto(v1alpha1.AnnotationPodEIPName, "shared", v1alpha1.AnnotationAllocatedEIPName, "shared", v1alpha1.AnnotationAllocatedEIPAddr, "10.225.51.9")),
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(named, "shared")}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.EventElasticIPNotFound, "remove 7 annotations"}},
		{name: "named ElasticIP by alias", w: world{pod: namedAlias, eips: []*v1alpha1.ElasticIP{userEIP("shared")}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"create attachment app eip=shared nic=app.eth0 label=app owner=uid-app"}},
		{name: "named ElasticIP missing", w: world{pod: named, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.EventElasticIPNotFound}},
		{name: "named ElasticIP deleting", w: world{pod: named, eips: []*v1alpha1.ElasticIP{userEIP("shared", eipDeleting)}, nics: []*v1alpha1.NetworkInterface{nicOf(named)}},
			want: []string{"problem " + v1alpha1.EventElasticIPNotFound}},
		{name: "named Pod gone: attachment goes, ElasticIP stays", w: world{name: "app", eips: []*v1alpha1.ElasticIP{userEIP("shared")},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(named, "shared")}}, want: []string{"delete attachment app"}},
		{name: "switched to a named ElasticIP: old attachment and own ElasticIP go", w: world{pod: newPod("web", auto(v1alpha1.AnnotationPodEIPName, "shared")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow"), userEIP("shared")}, atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(web, "web")},
			nics: []*v1alpha1.NetworkInterface{nicOf(web)}}, want: []string{"delete attachment web"}},
		{name: "Pod names its own automatic ElasticIP: kept and attached", w: world{pod: newPod("web", auto(v1alpha1.AnnotationPodEIPName, "web")),
			eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")}, nics: []*v1alpha1.NetworkInterface{nicOf(web)}},
			want: []string{"create attachment web eip=web nic=web.eth0 label=web owner=uid-web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(planPod(tt.w.inputs(t0)))
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("plan:\n  got  %q\n  want %q", got, want)
			}
		})
	}
}

// TestPlanMessages: Warning messages name the objects, quoted, lists sorted.
func TestPlanMessages(t *testing.T) {
	web := newPod("web", withEIP(""))
	tests := []struct {
		name string
		w    world
		want []string
	}{
		{name: "name taken", w: world{pod: web, eips: []*v1alpha1.ElasticIP{userEIP("web")}},
			want: []string{`ElasticIP "web"`, v1alpha1.LabelPod + "=web", "not taken over"}},
		{name: "ambiguous default", w: world{pod: web, networks: []*v1alpha1.ExternalNetwork{network("b", true), network("a", true)}},
			want: []string{`2 ExternalNetworks`, `("a", "b")`}},
		{name: "release blocked", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(web, "Follow")},
			atts: []*v1alpha1.ElasticIPAttachment{userAttachment("z", "web", "x.eth0"), userAttachment("y", "web", "x.eth0")}},
			want: []string{`"y", "z"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.w.inputs(t0)
			slices.Sort(in.Slots[0].Blockers)
			p := planPod(in)
			if len(p.Problems) != 1 {
				t.Fatalf("problems = %+v, want one", p.Problems)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Problems[0].Message, w) {
					t.Errorf("message %q lacks %q", p.Problems[0].Message, w)
				}
			}
		})
	}
}

// TestPlanOwnerReferences: a user's own controller reference survives; ours is added
// without the controller flag then, since only one controller is allowed.
func TestPlanOwnerReferences(t *testing.T) {
	web := newPod("web", withEIP("ext-net"))
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "uid-t", Controller: ptr.To(true)}
	eip := ownEIP(web, "Never", func(e *v1alpha1.ElasticIP) { e.OwnerReferences = []metav1.OwnerReference{other} })
	p := planPod(world{pod: web, eips: []*v1alpha1.ElasticIP{eip}}.inputs(t0))
	if p.Slots[0].UpdateEIP == nil {
		t.Fatal("no update planned")
	}
	refs := p.Slots[0].UpdateEIP.OwnerReferences
	if len(refs) != 2 || !equality.Semantic.DeepEqual(refs[0], other) || refs[1].UID != web.UID || refs[1].Controller != nil {
		t.Errorf("ownerReferences = %+v", refs)
	}
	if eip.Annotations[v1alpha1.AnnotationReleaseStrategy] != "Never" || len(eip.OwnerReferences) != 1 {
		t.Error("the cached ElasticIP was modified")
	}
}

// A Pod asking for both families gets one ElasticIP of each, an attachment of each, and
// each written back under its own keys; the managed-cloud keys name the IPv4 one. A Pod
// that drops a family releases that ElasticIP; one asking for IPv6 alone gets no IPv4.
func TestPlanFamilies(t *testing.T) {
	both := func(kv ...string) map[string]string {
		return withEIP("ext-net", append([]string{v1alpha1.AnnotationPodEIPIPFamilies, "IPv4,IPv6"}, kv...)...)
	}
	dual := newPod("web", both())
	v6only := newPod("web", withEIP("ext-net", v1alpha1.AnnotationPodEIPIPFamilies, "IPv6"))
	nets := []*v1alpha1.ExternalNetwork{network("ext-net", false)}
	own6 := func(p *corev1.Pod, mods ...func(*v1alpha1.ElasticIP)) *v1alpha1.ElasticIP {
		e := ownEIP(p, "Follow", mods...)
		e.Name, e.UID, e.Spec.IPFamily = "web-ipv6", "eip-uid-web-ipv6", v1alpha1.IPv6
		return e
	}
	att6 := func(p *corev1.Pod) *v1alpha1.ElasticIPAttachment {
		a := ownAttachment(p, "web-ipv6")
		a.Name, a.UID = "web-ipv6", "att-uid-web-ipv6"
		return a
	}
	aliasDual := newPod("web", auto(v1alpha1.AliasPodWithEIP, "true", v1alpha1.AnnotationPodEIPIPFamilies, "IPv4,IPv6"))
	tests := []struct {
		name string
		w    world
		want []string
	}{
		{name: "both families: two ElasticIPs", w: world{pod: dual, networks: nets},
			want: []string{"create eip web network=ext-net label=web strategy=Follow owner=uid-web",
				"create eip web-ipv6 network=ext-net label=web strategy=Follow owner=uid-web family=IPv6"}},
		{name: "IPv6 alone: one IPv6 ElasticIP", w: world{pod: v6only, networks: nets},
			want: []string{"create eip web-ipv6 network=ext-net label=web strategy=Follow owner=uid-web family=IPv6"}},
		{name: "both families: two attachments", w: world{pod: dual, eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow"), own6(dual)},
			nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"create attachment web eip=web nic=web.eth0 label=web owner=uid-web",
				"create attachment web-ipv6 eip=web-ipv6 nic=web.eth0 label=web owner=uid-web"}},
		{name: "both held: each written back under its keys", w: world{pod: dual,
			eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow", address("10.225.51.5"), heldBy(ownAttachment(dual, "web"))),
				own6(dual, address("fd00:225:51::5"), heldBy(att6(dual)))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(dual, "web"), att6(dual)}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"annotate web 10.225.51.5", "annotate ipv6 web-ipv6 fd00:225:51::5"}},
		{name: "IPv6 held, IPv4 not yet: only the IPv6 keys", w: world{pod: dual,
			eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow", address("10.225.51.5")),
				own6(dual, address("fd00:225:51::5"), heldBy(att6(dual)))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(dual, "web"), att6(dual)}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"annotate ipv6 web-ipv6 fd00:225:51::5"}},
		{name: "managed-cloud keys name the IPv4 one", w: world{pod: aliasDual,
			eips: []*v1alpha1.ElasticIP{ownEIP(aliasDual, "Follow", address("10.225.51.5"), heldBy(ownAttachment(aliasDual, "web"))),
				own6(aliasDual, address("fd00:225:51::5"), heldBy(att6(aliasDual)))},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(aliasDual, "web"), att6(aliasDual)}, nics: []*v1alpha1.NetworkInterface{nicOf(aliasDual)}},
			want: []string{"annotate web 10.225.51.5", "annotate ipv6 web-ipv6 fd00:225:51::5", "annotate managed-cloud web 10.225.51.5 web.eth0"}},
		{name: "IPv6 dropped: its attachment goes first", w: world{pod: newPod("web", withEIP("ext-net")),
			eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow"), own6(dual)},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(dual, "web"), att6(dual)}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"delete attachment web-ipv6"}},
		{name: "IPv6 dropped: then its ElasticIP", w: world{pod: newPod("web", withEIP("ext-net")),
			eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow"), own6(dual)},
			atts: []*v1alpha1.ElasticIPAttachment{ownAttachment(dual, "web")}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"delete eip web-ipv6"}},
		{name: "gone: both released", w: world{name: "web", eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow"), own6(dual)}},
			want: []string{"delete eip web", "delete eip web-ipv6"}},
		{name: "the IPv6 name taken by another Pod's ElasticIP", w: world{pod: dual, networks: nets,
			eips: []*v1alpha1.ElasticIP{ownEIP(dual, "Follow"), userEIP("web-ipv6", func(e *v1alpha1.ElasticIP) {
				e.Labels = map[string]string{v1alpha1.LabelPod: "web-ipv6"}
			})}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}},
			want: []string{"create attachment web eip=web nic=web.eth0 label=web owner=uid-web", "problem " + v1alpha1.EventElasticIPNameTaken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(planPod(tt.w.inputs(t0)))
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("plan:\n  got  %q\n  want %q", got, want)
			}
		})
	}
}

// The Pod's condition speaks of every family it asks for: True once it holds both, False
// with what the first one it lacks waits for.
func TestConditionFamilies(t *testing.T) {
	dual := newPod("web", withEIP("ext-net", v1alpha1.AnnotationPodEIPIPFamilies, "IPv4,IPv6"))
	a4 := ownAttachment(dual, "web")
	a6 := ownAttachment(dual, "web-ipv6")
	a6.Name, a6.UID = "web-ipv6", "att-uid-web-ipv6"
	e4 := ownEIP(dual, "Follow", address("10.225.51.5"), heldBy(a4))
	e6 := ownEIP(dual, "Follow", address("fd00:225:51::5"), heldBy(a6))
	e6.Name, e6.Spec.IPFamily = "web-ipv6", v1alpha1.IPv6
	pending6 := e6.DeepCopy()
	pending6.Status = v1alpha1.ElasticIPStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAllocated, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonNoAddressAvailable, Message: `ExternalNetwork "ext-net" has no IPv6 AddressPool ("ext-pool"): add one to its spec.addressPools`}}}
	w := world{pod: dual, eips: []*v1alpha1.ElasticIP{e4, e6}, atts: []*v1alpha1.ElasticIPAttachment{a4, a6}, nics: []*v1alpha1.NetworkInterface{nicOf(dual)}}
	c := planPod(w.inputs(t0)).Condition
	if c == nil || c.Status != corev1.ConditionTrue || c.Message != `ElasticIP "web" (10.225.51.5) is attached to this Pod by NAT through ElasticIPAttachment "web"; `+
		`ElasticIP "web-ipv6" (fd00:225:51::5) is attached to this Pod by NAT through ElasticIPAttachment "web-ipv6"` {
		t.Errorf("both held: %+v", c)
	}
	w.eips = []*v1alpha1.ElasticIP{e4, pending6}
	c = planPod(w.inputs(t0)).Condition
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.ReasonNoAddressAvailable || !strings.Contains(c.Message, "has no IPv6 AddressPool") {
		t.Errorf("IPv6 without a pool: %+v", c)
	}
}
