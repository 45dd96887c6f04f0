package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// reviewTimeout bounds the work on one review when the request does not say how long
// its sender waits (see reviewBudget), and a live list shared by several reviews.
const reviewTimeout = 4 * time.Second

// reviewBudget is how long one review may take: a tenth less than the `timeout` the
// API server puts in the URL of every call (the webhook's timeoutSeconds), so that it
// gets our answer, even a failure, rather than a timeout of its own; reviewTimeout when
// the parameter is absent, unreadable or longer.
func reviewBudget(r *http.Request) time.Duration {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 || d-d/10 > reviewTimeout {
		return reviewTimeout
	}
	return d - d/10
}

// Handler answers AdmissionReview requests (admission.k8s.io/v1) by running the rules
// of the object's kind.
type Handler struct {
	kinds   map[schema.GroupKind]kindFunc
	ready   func() bool
	metrics *Metrics
	live    *liveReads
	// inFlight holds a slot per review being read or judged (each body up to
	// MaxRequestBytes), in all and per client address.
	inFlight *slots
}

// DefaultMaxInFlight bounds the reviews read or judged at once. The API server sends a
// review per juneau write and annotated Pod; they take milliseconds.
const DefaultMaxInFlight = 32

// SetMetrics makes the handler count every review it answers and the reads of the API
// server they cause; call it before serving.
func (h *Handler) SetMetrics(m *Metrics) {
	h.metrics = m
	if h.live != nil {
		h.live.metrics = m
	}
}

// SetMaxInFlight bounds the reviews read or judged at once (n > 0), half of them at most
// from one client address; those beyond are answered 429 Too Many Requests. Call it
// before serving.
func (h *Handler) SetMaxInFlight(n int) { h.inFlight = newSlots(n) }

// NewHandler routes each kind to its rules. ready gates validation: until it reports
// true (caches synced), requests are denied with 503 rather than judged on empty caches.
func NewHandler(v *Validators, ready func() bool) *Handler {
	g := v1alpha1.GroupName
	return &Handler{ready: ready, live: v.r.live, inFlight: newSlots(DefaultMaxInFlight), kinds: map[schema.GroupKind]kindFunc{
		{Group: g, Kind: "AddressPool"}:         forKind(v.addressPoolRules()),
		{Group: g, Kind: "ExternalNetwork"}:     forKind(v.externalNetworkRules()),
		{Group: g, Kind: "ElasticIP"}:           forKind(v.elasticIPRules()),
		{Group: g, Kind: "ElasticIPAttachment"}: forKind(v.attachmentRules()),
		{Group: g, Kind: "NetworkInterface"}:    forKind(v.networkInterfaceRules()),
		{Group: g, Kind: "ARPAdvertisement"}:    forKind(v.arpAdvertisementRules()),
		{Group: g, Kind: "BGPAdvertisement"}:    forKind(v.bgpAdvertisementRules()),
		{Group: g, Kind: "BGPPeer"}:             forKind(v.bgpPeerRules()),
		{Group: g, Kind: "AllocationClaim"}:     forKind(v.claimRules()),
		{Group: corev1.GroupName, Kind: "Pod"}:  forKind(v.podRules()),
	}}
}

// ForPath returns the HTTP handler of one path: PathPods takes Pods, PathJuneau the
// juneau kinds. A kind sent to the wrong path is denied, which shows a misconfigured
// webhook registration at once instead of letting objects through unchecked.
func (h *Handler) ForPath(path string) http.Handler {
	accepts := func(gk schema.GroupKind) bool {
		if path == PathPods {
			return gk.Group == corev1.GroupName && gk.Kind == "Pod"
		}
		return gk.Group == v1alpha1.GroupName
	}
	return &pathHandler{h: h, path: path, accepts: accepts}
}

type pathHandler struct {
	h       *Handler
	path    string
	accepts func(schema.GroupKind) bool
}

func (p *pathHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			http.Error(w, "the body must be application/json", http.StatusUnsupportedMediaType)
			return
		}
	}
	release, reason, message := p.h.inFlight.take(r.RemoteAddr)
	if release == nil {
		p.h.metrics.refusedRequest(reason)
		w.Header().Set("Retry-After", "1")
		writeReview(w, http.StatusTooManyRequests, failedReview("", http.StatusTooManyRequests, message))
		return
	}
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			p.h.metrics.refusedRequest("too_large")
			writeReview(w, http.StatusRequestEntityTooLarge, failedReview("", http.StatusRequestEntityTooLarge,
				fmt.Sprintf("the AdmissionReview is larger than %d bytes", MaxRequestBytes)))
			return
		}
		writeReview(w, http.StatusBadRequest, failedReview("", http.StatusBadRequest, "reading the body: "+err.Error()))
		return
	}
	req, err := decodeReview(body)
	if err != nil {
		writeReview(w, http.StatusBadRequest, failedReview(uidOf(req), http.StatusBadRequest, err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewBudget(r))
	defer cancel()
	writeReview(w, http.StatusOK, &admissionv1.AdmissionReview{
		TypeMeta: reviewTypeMeta(),
		Response: p.judge(ctx, req),
	})
}

// judge runs the rules of the request's kind.
func (p *pathHandler) judge(ctx context.Context, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	start := time.Now()
	defer func() { p.h.metrics.observe(req.Kind.Kind, resp, time.Since(start)) }()
	logger := klog.FromContext(ctx).WithValues("uid", req.UID, "kind", req.Kind.Kind,
		"namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	defer func() {
		// A bug in one rule must cost one denied request, not the process.
		if v := recover(); v != nil {
			logger.Error(fmt.Errorf("%v", v), "Panic while validating")
			st := apierrors.NewInternalError(fmt.Errorf("the webhook failed while checking this %s", gk.Kind)).ErrStatus
			resp = response(req.UID, &st)
		}
	}()
	if !p.accepts(gk) {
		st := apierrors.NewBadRequest(fmt.Sprintf("%s does not validate %s objects: check the webhook configuration", p.path, gk)).ErrStatus
		return response(req.UID, &st)
	}
	check, ok := p.h.kinds[gk]
	if !ok || req.SubResource != "" {
		return response(req.UID, nil) // status and other subresources carry no rules
	}
	if p.h.ready != nil && !p.h.ready() {
		st := apierrors.NewServiceUnavailable("the webhook's caches are not synced yet").ErrStatus
		return response(req.UID, &st)
	}
	st := check(klog.NewContext(ctx, logger), req)
	if st != nil {
		st.Message = messages.Cut(st.Message, messages.MaxMessage)
		logger.V(2).Info("Denied", "code", st.Code, "message", st.Message)
	}
	return response(req.UID, st)
}

// decodeReview reads an admission.k8s.io/v1 AdmissionReview with a request. On error
// it still returns what it could read, so the answer can echo the request's UID.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("the body is not an AdmissionReview: %w", err)
	}
	want := reviewTypeMeta()
	switch {
	case review.APIVersion != want.APIVersion || review.Kind != want.Kind:
		return review.Request, fmt.Errorf("expected %s %s, got %q %q", want.APIVersion, want.Kind, review.APIVersion, review.Kind)
	case review.Request == nil:
		return nil, errors.New("the AdmissionReview has no request")
	case review.Request.UID == "":
		return review.Request, errors.New("the AdmissionReview request has no uid")
	}
	return review.Request, nil
}

func uidOf(req *admissionv1.AdmissionRequest) types.UID {
	if req == nil {
		return ""
	}
	return req.UID
}

func reviewTypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}
}

func response(uid types.UID, st *metav1.Status) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{UID: uid, Allowed: st == nil, Result: st}
}

func failedReview(uid types.UID, code int32, msg string) *admissionv1.AdmissionReview {
	return &admissionv1.AdmissionReview{
		TypeMeta: reviewTypeMeta(),
		Response: response(uid, &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: msg}),
	}
}

func writeReview(w http.ResponseWriter, code int, review *admissionv1.AdmissionReview) {
	body, err := json.Marshal(review)
	if err != nil {
		http.Error(w, "encoding the AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
