package webhookreplicas

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/status"
)

// Probed reports whether a webhook replica is one the API server may call, so one to
// probe: it has a Pod IP, is Ready (its endpoint is ready) and is not being deleted.
func Probed(p *corev1.Pod) bool {
	ready := status.PodCondition(p, string(corev1.PodReady))
	return p.DeletionTimestamp == nil && p.Status.PodIP != "" && ready != nil && ready.Status == corev1.ConditionTrue
}

// Decide takes one round of probes of the replicas: misses counts, for each replica, the
// rounds in a row it did not answer before this one; reached says which answered now.
// It returns the counts after this round (replicas gone are forgotten) and the replicas
// to delete: those that missed failures rounds in a row, but only while another replica
// answered this round, since when none does the controller's own network is the likelier
// culprit and deleting every replica would stop every write.
func Decide(misses map[types.UID]int, replicas []*corev1.Pod, reached map[types.UID]bool, failures int) (map[types.UID]int, []*corev1.Pod) {
	next := make(map[types.UID]int, len(replicas))
	answered := false
	for _, p := range replicas {
		if reached[p.UID] {
			answered = true
			continue
		}
		next[p.UID] = misses[p.UID] + 1
	}
	if !answered {
		return next, nil
	}
	var dead []*corev1.Pod
	for _, p := range replicas {
		if next[p.UID] >= failures {
			dead = append(dead, p)
		}
	}
	return next, dead
}
