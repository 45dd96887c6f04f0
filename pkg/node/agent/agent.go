package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/pkg/workloop"
)

// NAT programs the translation rules (nft.Programmer).
type NAT interface {
	Sync(ctx context.Context, desired nft.DesiredState) error
	Invalidate()
}

// ARP answers ARP for a set of addresses, announcing those named by SetGratuitous
// when it starts answering for them (arp.Responder).
type ARP interface {
	SetGratuitous(addrs []netip.Addr)
	// SetAddressesSince answers for addrs, c telling where they differ from an
	// earlier list (responder.Responder).
	SetAddressesSince(addrs []netip.Addr, c listdiff.Change)
}

// NDP answers Neighbor Discovery for a set of IPv6 addresses, never unsolicited
// (ndp.Responder).
type NDP interface {
	SetAddressesSince(addrs []netip.Addr, c listdiff.Change)
}

var (
	_ NAT = (*nft.Programmer)(nil)
)

// Config of the agent.
type Config struct {
	NodeName          string
	ExternalInterface string
	// ExternalMAC is the external interface's MAC, for the Answering condition.
	ExternalMAC  string
	ClusterCIDRs []netip.Prefix
	// Resync is the period of full re-syncs (every object re-read, rules rewritten).
	Resync time.Duration
	// MinInterval is the least time between two syncs; a burst of events costs one.
	MinInterval time.Duration
	// Clock drives the loop's waits and stamps conditions; nil: the real clock.
	Clock clock.WithTicker
	// QueueMetrics receives the loop's workqueue metrics; may be nil.
	QueueMetrics workqueue.MetricsProvider
	// Holds reports whether this agent holds the Node's datapath lock
	// (pkg/node/handover). While it does not, a sync only sets the ARP answers: the
	// NAT rules, conditions and readiness gates belong to the holder. The first sync
	// after it is taken is full. nil: always held.
	Holds func() bool
	// Answered is told the addresses ARP is answered for whenever they change while
	// the lock is held (handover.Saver), in a list it must not keep, with where the
	// list changed (listdiff.Change); may be nil.
	Answered func([]netip.Addr, listdiff.Change) error
	// Synced is called once, after the first sync from synced caches; may be nil.
	Synced func()
	// ExternalSubnets lists the IPv4 prefixes of the external interface's addresses
	// (read at every sync); may be nil.
	ExternalSubnets func() []netip.Prefix
}

// Listers are the agent's caches. Advertisements (of both kinds), Pods and NICs are field-selected to
// this Node by their informers; Attachments hold every Node's (in-cluster clients here
// reach ElasticIPs attached anywhere; see TrimAttachment). Pods, NICs, ElasticIPs and Networks
// serve the readiness gate and may be nil when it is not wanted.
type Listers struct {
	Attachments    listers.ElasticIPAttachmentLister
	Advertisements listers.ARPAdvertisementLister
	// BGPPeers of the cluster and the BGPAdvertisements naming this Node; may be nil
	// when BGP is not wanted.
	BGPPeers          listers.BGPPeerLister
	BGPAdvertisements listers.BGPAdvertisementLister
	Nodes             corelisters.NodeLister
	ServiceCIDRs      networkinglisters.ServiceCIDRLister
	Pods              corelisters.PodLister
	NICs              listers.NetworkInterfaceLister
	ElasticIPs        listers.ElasticIPLister
	Networks          listers.ExternalNetworkLister
}

// Agent is the node agent's control loop.
type Agent struct {
	cfg     Config
	client  versioned.Interface
	kube    kubernetes.Interface
	host    func(netip.Addr) (string, bool)
	listers Listers
	nat     NAT
	arp     ARP
	ndp     NDP
	metrics *Metrics

	// BGP (UseBGP): the speaker, the passwords of its peers, whether it got its first
	// peers, and the BGPNodeStatus last written (nil: not known yet). Used by the one
	// sync worker only.
	speaker    BGP
	passwords  *Passwords
	bgpStarted bool
	nodeStatus *v1alpha1.BGPNodeState
	// toldNoNextHop6: the agent logged that it has IPv6 addresses to announce and no
	// IPv6 next hop (once per run).
	toldNoNextHop6 bool

	loop   *workloop.Single
	synced []cache.InformerSynced
	// echoes are the agent's own writes, whose watch events start no sync.
	echoes echoes
	// views keep what Compute derives of attachments and advertisements; rebuildViews
	// asks the next inputs to rebuild them (a full sync).
	views        views
	rebuildViews bool
	// checker tells Compute what the NAT programmer keeps, from the change since the
	// last sync (Inputs.Check).
	checker nft.Checker

	// Read and written by the loop's one worker only.
	// lastRebuild is when the last sync that rebuilt the nftables table ended, and
	// rebuildCost how long it took (rebuildDue).
	lastRebuild time.Time
	rebuildCost time.Duration
	held        bool
	// answered: the addresses last handed to cfg.Answered (saved: with success), the
	// versions of the ARP and NDP lists they are (savedSeen), its edits (answeredT).
	answered   []netip.Addr
	answeredT  listdiff.Tracker
	saved      bool
	savedSeen  [2]uint64
	syncedOnce bool
	// The advertisements answered for (Desired.answered) and announced after the last
	// sync of the lock holder (nil before its first), whose changes are logged.
	answeringAds  []answeredAd
	announcingAds []servedAd
	// allMarked: the last sync found or made the Answering condition of every
	// advertisement it answered for (answeringAds) right.
	allMarked bool
	// answers: the answers of the last Compute, which the next patches; answersLogged:
	// the last sync logged them (else the next logs how many it answers for).
	answers       answerState
	answersLogged bool
}

// Clients the agent writes with: the Answering condition and the Pod readiness gate.
type Clients struct {
	Juneau versioned.Interface
	Kube   kubernetes.Interface
}

// New makes an agent; it starts nothing. Register informers with Watch before they
// start. arp answers for the IPv4 addresses, ndp for the IPv6 ones. host names the
// Node interface routing an address to a Pod (direct NICs).
func New(cfg Config, clients Clients, l Listers, nat NAT, arp ARP, ndp NDP, host func(netip.Addr) (string, bool), metrics *Metrics) *Agent {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	a := &Agent{cfg: cfg, client: clients.Juneau, kube: clients.Kube, host: host, listers: l, nat: nat, arp: arp, ndp: ndp, metrics: metrics}
	a.loop = workloop.NewSingle("node-agent", a.syncOnce, workloop.SingleConfig{
		MinInterval: cfg.MinInterval, Resync: cfg.Resync, Clock: cfg.Clock, Metrics: cfg.QueueMetrics,
	})
	return a
}

// Watch makes the events of an informer trigger a sync: every one but an update that
// changes nothing kept or is the echo of the agent's own write (handler). It is given
// the informers of every kind the agent reads: from then on its views follow the
// events of attachments, advertisements and ElasticIPs.
func (a *Agent) Watch(informers ...cache.SharedIndexInformer) error {
	a.views.enable()
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(a.handler()); err != nil {
			return err
		}
		a.synced = append(a.synced, inf.HasSynced)
	}
	return nil
}

// Trigger asks for a sync; triggers coalesce into one.
func (a *Agent) Trigger() { a.loop.Trigger() }

// RepairDrift answers a change another process made to juneau's nftables table
// (nft.DriftWatcher): the next sync rebuilds the whole table, and it comes at once.
func (a *Agent) RepairDrift(ctx context.Context, d nft.Drift) {
	reason := driftChanged
	if d.Lost && d.Changes == 0 {
		reason = driftLost
	}
	a.metrics.driftRepair(reason)
	a.nat.Invalidate()
	a.Trigger()
	klog.FromContext(ctx).Info("Repairing the nftables table changed behind the agent's back", "node", a.cfg.NodeName,
		"table", nft.TableName, "processes", d.Processes, "objects", d.Changes, "notificationsLost", d.Lost)
}

// Run syncs at once, then on every trigger (at most one sync per MinInterval) and every
// resync period, until ctx ends: the loop is a workloop.Single. A full sync (the first,
// each periodic one, and the retry of a failed one, with back-off) first drops what the
// NAT programmer believes is applied. Rules stay in place on return, so a restarting
// agent never interrupts translated traffic.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", a.cfg.NodeName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForNamedCacheSync("node-agent", ctx.Done(), a.synced...) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if a.passwords != nil {
		a.passwords.start(ctx)
		wg.Go(a.passwords.stop)
	}
	if a.speaker != nil {
		// Session changes move the Announced conditions, the BGPNodeStatus and the
		// readiness gates.
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-a.speaker.Changed():
					a.Trigger()
				}
			}
		})
	}
	a.loop.Run(ctx)
	return nil
}

// rebuildCostFactor bounds the time periodic full syncs spend rebuilding the nftables
// table to 1% of the agent's: a periodic full sync rebuilds it only once a hundred
// times the last rebuild's duration has passed since that rebuild ended. At 10,000
// mappings a rebuild takes 0.2 s, so it comes every resync period; 100,000 own and
// 100,000 in-cluster mappings take the programmer about 5 s, and a change that
// arrives meanwhile waits for it (docs/datapath.md).
const rebuildCostFactor = 100

// slowSync: a sync this long is logged with its kind (full: the first, a periodic one or
// a retry), what a change arriving during it waits for.
const slowSync = 100 * time.Millisecond

// rebuildDue reports whether a periodic full sync is to rebuild the table.
func (a *Agent) rebuildDue() bool {
	return a.lastRebuild.IsZero() || a.cfg.Clock.Since(a.lastRebuild) >= rebuildCostFactor*a.rebuildCost
}

// syncOnce is one turn of the loop. A full one (the first, each periodic one and the
// retry of a failed one) rebuilds the nftables table, the periodic ones unless the
// last rebuild is too recent for its cost (rebuildDue): drift between them is
// repaired when the kernel reports it (RepairDrift), and a failed sync makes the
// programmer rebuild anyway.
func (a *Agent) syncOnce(ctx context.Context, full bool) error {
	a.echoes.begin()
	defer func() {
		wake, echoes := a.echoes.end(a.cfg.Clock.Now())
		for range echoes {
			a.metrics.ignoredUpdate(ignoredOwnWrite)
		}
		if wake {
			a.Trigger()
		}
	}()
	a.rebuildViews = full
	holds := a.cfg.Holds == nil || a.cfg.Holds()
	if full || !holds || !a.held {
		// Compare every Answering condition: after a failure, periodically, and once
		// the datapath lock is (again) this agent's.
		a.allMarked = false
	}
	if !holds {
		return a.standby(ctx)
	}
	rebuild := full && a.rebuildDue()
	if !a.held {
		// Whatever the programmer believes applied, another agent wrote since.
		a.held, rebuild = true, true
	}
	if full && !rebuild {
		klog.FromContext(ctx).V(2).Info("Periodic resync without rebuilding the nftables table: the last rebuild was recent for its cost",
			"lastRebuild", a.lastRebuild, "took", a.rebuildCost)
	}
	if rebuild {
		a.nat.Invalidate()
	}
	start := a.cfg.Clock.Now()
	err := a.sync(ctx)
	if took := a.cfg.Clock.Since(start); took >= slowSync {
		klog.FromContext(ctx).Info("Slow datapath sync", "took", took, "full", full, "failed", err != nil)
	}
	if err != nil {
		a.nat.Invalidate()
		return err
	}
	if rebuild {
		a.lastRebuild = a.cfg.Clock.Now()
		a.rebuildCost = a.lastRebuild.Sub(start)
	}
	a.markSynced()
	return nil
}

// standby is the sync of an agent waiting for the datapath lock: it answers ARP for
// what this Node serves according to its caches, and writes nothing else.
func (a *Agent) standby(ctx context.Context) error {
	in, err := a.inputs()
	if err != nil {
		return err
	}
	d := a.compute(in)
	a.allMarked, a.answersLogged = false, false // nothing marked or logged here
	a.arp.SetGratuitous(d.Gratuitous)
	a.arp.SetAddressesSince(d.ARP, d.ARPChange)
	if a.ndp != nil {
		a.ndp.SetAddressesSince(d.NDP, d.NDPChange)
	}
	if !a.syncedOnce {
		klog.FromContext(ctx).Info("Answering ARP from the caches while another agent holds the datapath", "addresses", len(d.ARP))
	}
	a.markSynced()
	return nil
}

func (a *Agent) markSynced() {
	if !a.syncedOnce {
		a.syncedOnce = true
		if a.cfg.Synced != nil {
			a.cfg.Synced()
		}
	}
}

// sync computes the desired state from the caches and applies it.
func (a *Agent) sync(ctx context.Context) error {
	start := time.Now()
	in, err := a.inputs()
	if err != nil {
		return err
	}
	d := a.compute(in)
	marked, logged := a.allMarked, a.answersLogged
	a.allMarked, a.answersLogged = false, false // until this sync marks and logs d's
	err = a.nat.Sync(ctx, d.NAT)
	a.metrics.observeSync(time.Since(start), len(d.NAT.Mappings), err)
	// Mappings left out as invalid or conflicting must not hold up the rest: ARP, the
	// Answering conditions and the readiness gates follow what was programmed (Compute
	// leaves the left-out ones out of them too), and the error is still returned.
	if err != nil && !errors.Is(err, nft.ErrInvalidMapping) {
		return fmt.Errorf("programming NAT: %w", err)
	}
	a.arp.SetGratuitous(d.Gratuitous)
	a.arp.SetAddressesSince(d.ARP, d.ARPChange)
	if a.ndp != nil {
		a.ndp.SetAddressesSince(d.NDP, d.NDPChange)
	}
	if err := a.saveAnswered(d); err != nil {
		return err
	}
	// The Answering conditions and the log look only where the answered list changed
	// since the last sync (Desired.answeredSince): an advertisement whose cached object
	// is the same holds the condition found right then.
	toMark := d.answered
	if marked {
		toMark = d.answered[d.answeredSince.Start:d.answeredSince.NewEnd]
	}
	started, markErr := a.markAnswering(ctx, in, toMark, d.Refused)
	a.allMarked = markErr == nil
	a.logAnswering(ctx, in, d, logged, started)
	a.answersLogged = true
	if markErr != nil {
		return markErr
	}
	announced, bgpErr := a.applyBGP(ctx, in, d)
	a.logAnnouncing(ctx, in, d)
	if err := a.writeReadiness(ctx, in, d, announced); err != nil {
		return err
	}
	if bgpErr != nil {
		return bgpErr
	}
	if err != nil {
		return fmt.Errorf("programming NAT: %w", err)
	}
	return nil
}

func (a *Agent) inputs() (Inputs, error) { return a.read(true) }

// read reads the caches into Inputs, through the views when views (they then move on
// to the caches' version: only a sync reads through them).
func (a *Agent) read(views bool) (Inputs, error) {
	in := Inputs{NodeName: a.cfg.NodeName, ExternalInterface: a.cfg.ExternalInterface, ClusterCIDRs: a.cfg.ClusterCIDRs, HostInterface: a.host,
		Check: a.checker.Check}
	if a.cfg.ExternalSubnets != nil {
		in.ExternalSubnets = a.cfg.ExternalSubnets()
	}
	var err error
	if views {
		if in.derived, err = a.views.update(a.listers, a.cfg.NodeName, a.rebuildViews); err != nil {
			return in, err
		}
		a.rebuildViews = false
	}
	if a.listers.NICs != nil {
		if in.NICs, err = a.listers.NICs.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if a.listers.Pods != nil {
		if in.Pods, err = a.listers.Pods.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if a.listers.ElasticIPs != nil {
		in.ElasticIPs = elasticIPLister{a.listers.ElasticIPs}
	}
	if a.listers.Networks != nil {
		nets, err := a.listers.Networks.List(labels.Everything())
		if err != nil {
			return in, err
		}
		in.Networks = make(map[string]*v1alpha1.ExternalNetwork, len(nets))
		for _, n := range nets {
			in.Networks[n.Name] = n
		}
	}
	// With the views, Compute reads neither list whole: the readiness gates and the log
	// of what stopped list them when they need them (lazy), which a sync after one change
	// at 100,000 of each mostly does not (two lists took a fifth of such a sync).
	if in.derived != nil {
		in.listers = &a.listers
	} else {
		if in.Attachments, err = a.listers.Attachments.List(labels.Everything()); err != nil {
			return in, err
		}
		if in.Advertisements, err = a.listers.Advertisements.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if in.Nodes, err = a.listers.Nodes.List(labels.Everything()); err != nil {
		return in, err
	}
	if a.listers.ServiceCIDRs != nil {
		if in.ServiceCIDRs, err = a.listers.ServiceCIDRs.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if a.listers.BGPPeers != nil {
		if in.BGPPeers, err = a.listers.BGPPeers.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if a.listers.BGPAdvertisements != nil {
		if in.BGPAdvertisements, err = a.listers.BGPAdvertisements.List(labels.Everything()); err != nil {
			return in, err
		}
	}
	if a.passwords != nil {
		in.Password = a.passwords.Password
	}
	if a.speaker != nil {
		in.IPv6NextHop = a.speaker.NextHop6().IsValid()
	}
	return in, nil
}

// waitedSince tells the loop that the sync waited for the API server since asked (one
// request): the gap before the next sync counts the agent's own work, not the API
// server's (workloop.Single.Waited). A change that comes while a sync writes conditions
// no longer waits as long again after it.
func (a *Agent) waitedSince(asked time.Time) {
	if a.loop != nil {
		a.loop.Waited(a.cfg.Clock.Since(asked))
	}
}

// wrote remembers an object the agent wrote, whose watch event is its echo.
func (a *Agent) wrote(m metav1.Object) { a.echoes.wrote(m, a.cfg.Clock.Now()) }
