package podeip

import (
	"testing"
	"time"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
)

func TestDecideRelease(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 250_000_000, time.UTC)
	mark := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339) }
	tests := []struct {
		name, strategy, since string
		want                  releaseDecision
	}{
		{name: "Follow", strategy: "Follow", want: releaseDecision{Action: releaseNow}},
		{name: "Follow ignores a mark", strategy: "Follow", since: mark(-time.Hour), want: releaseDecision{Action: releaseNow}},
		{name: "Never", strategy: "Never", want: releaseDecision{Action: releaseNever}},
		{name: "Never ignores a mark", strategy: "Never", since: mark(-time.Hour), want: releaseDecision{Action: releaseNever}},
		{name: "missing strategy keeps", want: releaseDecision{Action: releaseNever}},
		{name: "unreadable strategy keeps", strategy: "follow", want: releaseDecision{Action: releaseNever}},
		{name: "zero delay keeps", strategy: "0s", want: releaseDecision{Action: releaseNever}},
		{name: "negative delay keeps", strategy: "-5m", want: releaseDecision{Action: releaseNever}},
		// The mark is rounded up to the next whole second, never down.
		{name: "delay starts: mark now", strategy: "3s",
			want: releaseDecision{Action: releaseLater, Mark: "2026-03-04T05:06:08Z", At: time.Date(2026, 3, 4, 5, 6, 11, 0, time.UTC)}},
		{name: "unreadable mark starts again", strategy: "10m0s", since: "yesterday",
			want: releaseDecision{Action: releaseLater, Mark: "2026-03-04T05:06:08Z", At: time.Date(2026, 3, 4, 5, 16, 8, 0, time.UTC)}},
		{name: "delay running", strategy: "10m0s", since: "2026-03-04T05:00:00Z",
			want: releaseDecision{Action: releaseLater, At: time.Date(2026, 3, 4, 5, 10, 0, 0, time.UTC)}},
		{name: "delay over", strategy: "5m30s", since: "2026-03-04T05:00:37Z", want: releaseDecision{Action: releaseNow}},
		{name: "due exactly now", strategy: "1m", since: "2026-03-04T05:05:07.25Z", want: releaseDecision{Action: releaseNow}},
		{name: "mark from another zone", strategy: "1h", since: "2026-03-04T14:00:00+09:00",
			want: releaseDecision{Action: releaseLater, At: time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideRelease(tt.strategy, tt.since, now)
			if got.Action != tt.want.Action || got.Mark != tt.want.Mark || !got.At.Equal(tt.want.At) {
				t.Errorf("decideRelease(%q, %q) = %+v, want %+v", tt.strategy, tt.since, got, tt.want)
			}
		})
	}
}

func TestRecordedReleaseRoundTrip(t *testing.T) {
	for _, rs := range []annotations.ReleaseStrategy{
		{Kind: annotations.ReleaseFollow},
		{Kind: annotations.ReleaseNever},
		{Kind: annotations.ReleaseAfter, After: 10 * time.Minute},
		{Kind: annotations.ReleaseAfter, After: 5*time.Minute + 30*time.Second},
		{Kind: annotations.ReleaseAfter, After: 1500 * time.Millisecond},
	} {
		got, ok := parseRecordedRelease(formatRelease(rs))
		if !ok || got != rs {
			t.Errorf("round trip of %+v via %q = %+v, %v", rs, formatRelease(rs), got, ok)
		}
	}
	if got := formatRelease(annotations.ReleaseStrategy{Kind: annotations.ReleaseAfter, After: 10 * time.Minute}); got != "10m0s" {
		t.Errorf("formatRelease(10m) = %q", got)
	}
}

func TestCeilSecond(t *testing.T) {
	whole := time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	if got := ceilSecond(whole); !got.Equal(whole) {
		t.Errorf("ceilSecond(whole second) = %v", got)
	}
	if got := ceilSecond(whole.Add(time.Nanosecond)); !got.Equal(whole.Add(time.Second)) {
		t.Errorf("ceilSecond(just after) = %v", got)
	}
}
