package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeSvc records calls and answers from a function.
type fakeSvc struct {
	mu     sync.Mutex
	calls  []string // method + " " + params
	answer func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

func (f *fakeSvc) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls = append(f.calls, method+" "+mustCompact(params))
	f.mu.Unlock()
	if f.answer != nil {
		return f.answer(ctx, method, params)
	}
	return json.RawMessage(`{"method":"` + method + `","params":` + string(params) + `}`), nil
}

func (f *fakeSvc) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func mustCompact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSvcMethods(t *testing.T) {
	p := newTestPool(t, nil)
	tests := []struct {
		call, method, params string
	}{
		{`req.svc.tokenize({ type: 'card', data: { number: req.args.pan } })`, SvcTokenize, `{"data":{"number":"4242424242424242"},"type":"card"}`},
		{`req.svc.tokens.create({ type: 'token', data: 'x' })`, SvcTokensCreate, `{"data":"x","type":"token"}`},
		{`req.svc.tokens.retrieve('tok_1')`, SvcTokensRetrieve, `{"id":"tok_1"}`},
		{`req.svc.tokens.update('tok_1', { metadata: { a: 'b' } })`, SvcTokensUpdate, `{"id":"tok_1","patch":{"metadata":{"a":"b"}}}`},
		{`req.svc.tokens.delete('tok_1')`, SvcTokensDelete, `{"id":"tok_1"}`},
		{`req.svc.tokens.list({ size: 5 })`, SvcTokensList, `{"size":5}`},
		{`req.svc.tokens.list()`, SvcTokensList, `{}`},
		{`req.svc.detokenize({ number: '{{ tok_1 }}' })`, SvcDetokenize, `{"number":"{{ tok_1 }}"}`},
		{`req.svc.detokenize(undefined)`, SvcDetokenize, `null`},
		{`req.bt.tokenize('alias')`, SvcTokenize, `"alias"`},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.params, func(t *testing.T) {
			svc := &fakeSvc{}
			args, _ := json.Marshal(map[string]string{"pan": "4242424242424242"})
			res, err := p.Run(context.Background(), Job{Kind: JobReactor, Svc: svc, Args: args,
				Code: `module.exports = async (req) => ({ raw: await ` + tc.call + ` })`})
			if err != nil {
				t.Fatal(err)
			}
			want := `{"method":"` + tc.method + `","params":` + tc.params + `}`
			if mustJSON(t, res.Raw) != mustCompact(json.RawMessage(want)) {
				t.Errorf("raw = %s, want %s", res.Raw, want)
			}
			if got := svc.recorded(); len(got) != 1 || got[0] != tc.method+" "+tc.params {
				t.Errorf("calls = %q", got)
			}
		})
	}
}

func TestSvcErrorsAndLimits(t *testing.T) {
	p := newTestPool(t, func(o *Options) { o.MaxSvcCalls = 3; o.Timeout = time.Second })
	forbidden := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return nil, &SvcError{Status: 403, Message: "token:read is required"}
	}
	internal := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("badger: secret internal detail")
	}
	invalid := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{not json`), nil
	}
	catchCode := `module.exports = async (req) => {
		try { await req.svc.tokens.retrieve('t'); return { raw: 'resolved' }; }
		catch (e) { return { raw: [e.name, e.status, e.message, e instanceof Error] }; }
	};`
	tests := []struct {
		name   string
		answer func(context.Context, string, json.RawMessage) (json.RawMessage, error)
		code   string
		raw    string
		kind   string
		msg    string
		calls  int
	}{
		{name: "SvcError reaches the code", answer: forbidden, code: catchCode, raw: `["ServiceError",403,"token:read is required",true]`, calls: 1},
		{name: "other errors are hidden", answer: internal, code: catchCode, raw: `["ServiceError",500,"service call failed",true]`, calls: 1},
		{name: "invalid JSON from the service", answer: invalid, code: catchCode, raw: `["ServiceError",502,"the service returned an invalid response",true]`, calls: 1},
		{name: "uncaught rejection fails the run", answer: forbidden, code: `module.exports = async (req) => { await req.svc.tokenize({}); }`,
			kind: KindRuntime, msg: "ServiceError: token:read is required", calls: 1},
		{name: "call limit", code: `module.exports = async (req) => {
				const r = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => req.svc.tokens.retrieve('t' + i)));
				return { raw: r.map((x) => x.status === 'fulfilled' ? 'ok' : x.reason.status) };
			};`, raw: `["ok","ok","ok",429,429]`, calls: 3},
		{name: "slow service hits the deadline", answer: func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, code: `module.exports = async (req) => ({ raw: await req.svc.tokenize({}) })`, kind: KindTimeout, calls: 1},
		{name: "panicking service", answer: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			panic("boom")
		}, code: catchCode, raw: `["ServiceError",500,"service call failed",true]`, calls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &fakeSvc{answer: tc.answer}
			res, err := p.Run(context.Background(), Job{Kind: JobReactor, Svc: svc, Code: tc.code})
			if kindOf(err) != tc.kind {
				t.Fatalf("err = %v, want kind %q", err, tc.kind)
			}
			if tc.msg != "" && !contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %q", err, tc.msg)
			}
			if tc.raw != "" && mustJSON(t, res.Raw) != tc.raw {
				t.Errorf("raw = %s, want %s", res.Raw, tc.raw)
			}
			if n := len(svc.recorded()); n != tc.calls {
				t.Errorf("%d calls reached the service, want %d", n, tc.calls)
			}
		})
	}
}

func TestSvcAbsentAndConcurrent(t *testing.T) {
	p := newTestPool(t, nil)
	res, err := run(t, p, JobReactor, `module.exports = (req) => ({ raw: [typeof req.svc, typeof req.bt, Object.keys(req)] })`, nil)
	if err != nil || mustJSON(t, res.Raw) != `["undefined","undefined",["args","configuration"]]` {
		t.Fatalf("without Svc: %v %s", err, res.Raw)
	}
	var inflight, most int
	var mu sync.Mutex
	svc := &fakeSvc{answer: func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		inflight--
		mu.Unlock()
		return params, nil
	}}
	start := time.Now()
	res, err = p.Run(context.Background(), Job{Kind: JobReactor, Svc: svc,
		Code: `module.exports = async (req) => ({ raw: await Promise.all([...Array(10).keys()].map((i) => req.svc.tokenize({ i }))) })`})
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, res.Raw) != `[{"i":0},{"i":1},{"i":2},{"i":3},{"i":4},{"i":5},{"i":6},{"i":7},{"i":8},{"i":9}]` {
		t.Errorf("raw = %s", res.Raw)
	}
	if most < 2 || time.Since(start) > 400*time.Millisecond {
		t.Errorf("calls did not overlap: at most %d in flight, %v", most, time.Since(start))
	}
}
