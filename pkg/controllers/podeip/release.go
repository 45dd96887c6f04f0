package podeip

import (
	"time"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// formatRelease is how a strategy is recorded on the ElasticIP: "Follow", "Never" or a
// Go duration. The Pod's own annotations are gone with the Pod, so the ElasticIP keeps
// the strategy that applies to it.
func formatRelease(rs annotations.ReleaseStrategy) string {
	if rs.Kind == annotations.ReleaseAfter {
		return rs.After.String()
	}
	return string(rs.Kind)
}

// parseRecordedRelease reads a recorded strategy. ok is false when it is missing or
// unreadable.
func parseRecordedRelease(v string) (annotations.ReleaseStrategy, bool) {
	switch v {
	case v1alpha1.ReleaseFollow:
		return annotations.ReleaseStrategy{Kind: annotations.ReleaseFollow}, true
	case v1alpha1.ReleaseNever:
		return annotations.ReleaseStrategy{Kind: annotations.ReleaseNever}, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return annotations.ReleaseStrategy{}, false
	}
	return annotations.ReleaseStrategy{Kind: annotations.ReleaseAfter, After: d}, true
}

// releaseAction is what happens to an automatic ElasticIP whose Pod left.
type releaseAction int

const (
	// releaseNever keeps the ElasticIP.
	releaseNever releaseAction = iota
	// releaseNow deletes it.
	releaseNow
	// releaseLater deletes it at releaseDecision.At.
	releaseLater
)

// releaseDecision is the outcome of decideRelease.
type releaseDecision struct {
	Action releaseAction
	// At is when a delayed release falls due.
	At time.Time
	// Mark is the value to record in AnnotationPodGoneSince; "" when the recorded one
	// stands.
	Mark string
}

// decideRelease says what to do with an ElasticIP whose Pod left, from the strategy
// and gone-since mark recorded on it. A strategy that cannot be read keeps the address:
// releasing one without a reason could take it from a Pod that comes back. A missing or
// unreadable mark starts the delay now.
func decideRelease(recorded, goneSince string, now time.Time) releaseDecision {
	rs, ok := parseRecordedRelease(recorded)
	if !ok {
		return releaseDecision{Action: releaseNever}
	}
	switch rs.Kind {
	case annotations.ReleaseFollow:
		return releaseDecision{Action: releaseNow}
	case annotations.ReleaseNever:
		return releaseDecision{Action: releaseNever}
	}
	d := releaseDecision{Action: releaseLater}
	since, err := time.Parse(time.RFC3339, goneSince)
	if err != nil {
		since = ceilSecond(now)
		d.Mark = since.Format(time.RFC3339)
	}
	d.At = since.Add(rs.After)
	if !now.Before(d.At) {
		return releaseDecision{Action: releaseNow}
	}
	return d
}

// ceilSecond rounds up to a whole second, the precision of RFC 3339 marks, so the
// recorded time never makes a release come early.
func ceilSecond(t time.Time) time.Time {
	r := t.Truncate(time.Second)
	if r.Before(t) {
		r = r.Add(time.Second)
	}
	return r.UTC()
}
