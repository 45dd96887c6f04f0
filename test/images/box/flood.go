package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// flood POSTs to URL from many workers at once for a while, as a Pod attacking an
// admission webhook would: every other request a body of -size bytes of padding, the
// others the -review body (a forged AdmissionReview). It prints how the server answered:
// one line, "flood: N requests: 200=a 413=b 429=c errors=d".
func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	workers := fs.Int("c", 64, "requests in flight at once")
	duration := fs.Duration("for", 30*time.Second, "how long to send")
	size := fs.Int("size", 3<<20, "bytes of each padding body")
	review := fs.String("review", "", "the forged body sent every other request (empty: padding only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: box flood [-c N] [-for DURATION] [-size BYTES] [-review JSON] URL")
	}
	url := fs.Arg(0)
	padding := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","padding":"`), bytes.Repeat([]byte("a"), *size)...)
	padding = append(padding[:*size-2], '"', '}')
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		// The flood does not care who answers; the webhook's certificate is its own.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
		MaxIdleConnsPerHost: *workers,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var mu sync.Mutex
	answers := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				body := padding
				if *review != "" && i%2 == 1 {
					body = []byte(*review)
				}
				answer := post(ctx, client, url, body)
				if ctx.Err() != nil && answer == "errors" {
					return // cut short by the end of the flood, not refused
				}
				mu.Lock()
				answers[answer]++
				total++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, answers[k]))
	}
	fmt.Printf("flood: %d requests: %s\n", total, strings.Join(parts, " "))
	return nil
}

// post sends one body and returns the answer's status code, or "errors".
func post(ctx context.Context, client *http.Client, url string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "errors"
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "errors"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}
