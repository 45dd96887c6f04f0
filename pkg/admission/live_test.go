package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestSharedListJoinsTheNextList: while a list of a kind runs, every review asking for
// one waits for the next, which starts after they asked; many reviews cost two lists.
func TestSharedListJoinsTheNextList(t *testing.T) {
	l := newLiveReads()
	var started atomic.Int32
	release := make(chan struct{})
	list := func(context.Context) ([]int, error) {
		n := started.Add(1)
		if n == 1 {
			<-release // the first list is slow
		}
		return []int{int(n)}, nil
	}
	ctx := context.Background()
	first := make(chan []int, 1)
	go func() {
		got, _ := sharedList(ctx, l, "ElasticIPs", list)
		first <- got
	}()
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return started.Load() == 1, nil
	}); err != nil {
		t.Fatal("the first list never started")
	}
	// Ten reviews ask while the first list runs.
	var wg sync.WaitGroup
	results := make([][]int, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = sharedList(ctx, l, "ElasticIPs", list)
		}()
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		next := l.kinds["ElasticIPs"].next
		return next != nil && next.waiters == len(results), nil
	}); err != nil {
		t.Fatal("the reviews asking meanwhile never gathered")
	}
	close(release)
	wg.Wait()
	if got := <-first; len(got) != 1 || got[0] != 1 {
		t.Errorf("the first review got %v, want the first list", got)
	}
	for i, got := range results {
		if len(got) != 1 || got[0] != 2 {
			t.Errorf("review %d got %v, want the second list (started after it asked)", i, got)
		}
	}
	if n := started.Load(); n != 2 {
		t.Errorf("%d lists for 11 reviews, want 2", n)
	}
}

// TestSpentBudgetKeepsTheCacheAnswer: past the budget, a re-check is skipped and the
// cache's answer stands; a GET of an object the cache lacks is refused, to be retried.
func TestSpentBudgetKeepsTheCacheAnswer(t *testing.T) {
	l := newLiveReads()
	l.limiter = rate.NewLimiter(0, 0)
	ctx := context.Background()
	if _, err := sharedList(ctx, l, "ElasticIPs", func(context.Context) ([]int, error) {
		t.Error("listed past the budget")
		return nil, nil
	}); !errors.Is(err, ErrNoBudget) {
		t.Errorf("sharedList past the budget: %v, want ErrNoBudget", err)
	}
	r := &reader{live: l}
	calls := 0
	got, err := confirmed(ctx, func(r []string) bool { return len(r) == 0 }, func(ctx context.Context, live bool) ([]string, error) {
		calls++
		if live {
			return sharedList(ctx, r.live, "ElasticIPs", func(context.Context) ([]string, error) { return []string{"in the way"}, nil })
		}
		return nil, nil
	})
	if err != nil || len(got) != 0 || calls != 2 {
		t.Errorf("confirmed past the budget: %v, %v after %d checks; want the cache's empty answer after 2", got, err, calls)
	}
	_, err = getFresh(ctx, l, "ElasticIP shop/web", func() (*int, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "elasticips"}, "web")
	},
		func(context.Context) (*int, error) { t.Error("read past the budget"); return nil, nil })
	if !errors.Is(err, ErrNoBudget) {
		t.Errorf("getFresh past the budget: %v, want ErrNoBudget", err)
	}
}

// TestHandlerBoundsReviewsInFlight: beyond the bound, a review is answered 429 with
// Retry-After before its body is read; once one ends, the next is judged.
func TestHandlerBoundsReviewsInFlight(t *testing.T) {
	f := newFixture(t)
	f.handler.SetMaxInFlight(1)
	h := f.handler.ForPath(PathJuneau)
	valid := mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(),
		Request: request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil)})

	// A slow client holds the only slot while it sends its body.
	pr, pw := io.Pipe()
	slow := httptest.NewRequest(http.MethodPost, PathJuneau, pr)
	slow.Header.Set("Content-Type", "application/json")
	slowDone := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, slow)
		slowDone <- w.Code
	}()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return f.handler.inFlight.inUse() == 1, nil
	}); err != nil {
		t.Fatal("the slow review never took the slot")
	}
	code, review := post(t, h, valid)
	if code != http.StatusTooManyRequests {
		t.Fatalf("a second review while one is read: HTTP %d, want 429", code)
	}
	if r := review.Response; r == nil || r.Allowed || r.Result == nil || r.Result.Code != http.StatusTooManyRequests {
		t.Errorf("the refused review's response: %+v", r)
	}
	if _, err := pw.Write(valid); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if c := <-slowDone; c != http.StatusOK {
		t.Errorf("the slow review: HTTP %d, want 200", c)
	}
	if code, review := post(t, h, valid); code != http.StatusOK || review.Response == nil || !review.Response.Allowed {
		t.Errorf("a review after the slow one: HTTP %d %+v, want allowed", code, review.Response)
	}
}

// TestHandlerSharesSlotsBetweenClients: one client address holds at most half the
// slots; beyond its share it is answered 429 while another address is still judged.
func TestHandlerSharesSlotsBetweenClients(t *testing.T) {
	f := newFixture(t)
	f.handler.SetMaxInFlight(4)
	h := f.handler.ForPath(PathJuneau)
	valid := mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(),
		Request: request(t, admissionv1.Create, pool("p", arp, "10.225.51.0/24"), nil)})
	from := func(addr string, body io.Reader) *http.Request {
		r := httptest.NewRequest(http.MethodPost, PathJuneau, body)
		r.Header.Set("Content-Type", "application/json")
		r.RemoteAddr = addr
		return r
	}
	// Two slow reviews from one Pod hold its share, half of the four slots.
	var writers []*io.PipeWriter
	done := make(chan int, 2)
	for i := range 2 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, from(fmt.Sprintf("10.244.1.7:%d", 40000+i), pr))
			done <- w.Code
		}()
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return f.handler.inFlight.inUse() == 2, nil
	}); err != nil {
		t.Fatal("the slow reviews never took their slots")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, from("10.244.1.7:40002", bytes.NewReader(valid)))
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "from 10.244.1.7 already, its share") {
		t.Errorf("a third review from the same Pod: HTTP %d %s, want 429 naming its share", w.Code, w.Body.String())
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, from("10.225.51.10:50000", bytes.NewReader(valid)))
	if w.Code != http.StatusOK {
		t.Errorf("a review from another address while the Pod holds its share: HTTP %d %s, want 200", w.Code, w.Body.String())
	}
	for _, pw := range writers {
		_, _ = pw.Write(valid)
		pw.Close()
	}
	for range 2 {
		if c := <-done; c != http.StatusOK {
			t.Errorf("a slow review: HTTP %d, want 200", c)
		}
	}
	if n := f.handler.inFlight.inUse(); n != 0 {
		t.Errorf("%d slots still taken after every review ended", n)
	}
}

// TestSlowListsCostMore: a list that takes the API server longer counts as that many
// reads, so the reads left shrink with the time lists take, not only with their
// number.
func TestSlowListsCostMore(t *testing.T) {
	reads := func(l *liveReads) int {
		n := 0
		for l.allow("ARPAdvertisements") {
			n++
		}
		return n
	}
	if got := reads(newLiveReads()); got < liveReadsBurst || got > liveReadsBurst+1 {
		t.Fatalf("a fresh budget allowed %d reads in a row, want the burst of %d", got, liveReadsBurst)
	}
	l := newLiveReads()
	if !l.allow("ARPAdvertisements") {
		t.Fatal("a fresh budget refused a read")
	}
	l.charge(30 * liveReadUnit)
	// The list stood for 30 reads, one of them taken by allow.
	if got, want := reads(l), liveReadsBurst-30; got < want || got > want+2 {
		t.Errorf("after a list of %s, %d reads were left, want %d", 30*liveReadUnit, got, want)
	}
	l.charge(time.Hour)
	if l.allow("ARPAdvertisements") {
		t.Error("a read was allowed at once after a list that took an hour")
	}
}
