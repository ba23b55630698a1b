package transforms

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/dop251/goja"
)

// Svc is the service client behind req.svc: the vault operations a run may
// perform with the key of the proxy's or reactor's application. The pool
// calls it in the parent process, never in the worker, with the run's
// context (cancelled when the run ends).
//
// The methods and their params, as JSON:
//
//	req.svc.tokenize(body)          "tokenize"         body
//	req.svc.tokens.create(body)     "tokens.create"    body
//	req.svc.tokens.retrieve(id)     "tokens.retrieve"  {"id": id}
//	req.svc.tokens.update(id, p)    "tokens.update"    {"id": id, "patch": p}
//	req.svc.tokens.delete(id)       "tokens.delete"    {"id": id}
//	req.svc.tokens.list(query)      "tokens.list"      query, or {}
//	req.svc.detokenize(value)       "detokenize"       value
//
// An undefined argument crosses as null. The JSON that Call returns
// resolves the promise the JavaScript method returned; an error rejects it
// with an Error whose status and message come from a *SvcError (any other
// error becomes status 500, "service call failed"). The same object is
// also reachable as req.bt, the name Basis Theory transforms use.
type Svc interface {
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// Svc method names.
const (
	SvcTokenize       = "tokenize"
	SvcTokensCreate   = "tokens.create"
	SvcTokensRetrieve = "tokens.retrieve"
	SvcTokensUpdate   = "tokens.update"
	SvcTokensDelete   = "tokens.delete"
	SvcTokensList     = "tokens.list"
	SvcDetokenize     = "detokenize"
)

var svcMethods = map[string]bool{
	SvcTokenize: true, SvcTokensCreate: true, SvcTokensRetrieve: true, SvcTokensUpdate: true,
	SvcTokensDelete: true, SvcTokensList: true, SvcDetokenize: true,
}

// pendingCall is an svc call the worker waits on.
type pendingCall struct {
	resolve, reject func(any) error
}

// svcCall(method, paramsJSON) Promise: the worker side of req.svc. It
// sends a call frame to the parent and returns a promise that deliver
// settles when the reply comes.
func (rt *jobRuntime) svcCall(call goja.FunctionCall) goja.Value {
	method, params := call.Argument(0).String(), call.Argument(1).String()
	p, resolve, reject := rt.vm.NewPromise()
	fail := func(status int, msg string) goja.Value {
		if err := reject(rt.call(rt.helpers.svcError, rt.vm.ToValue(status), rt.vm.ToValue(msg))); err != nil {
			panic(err)
		}
		return rt.vm.ToValue(p)
	}
	rt.svcCalls++
	switch {
	case !svcMethods[method]:
		return fail(400, "unknown service method")
	case rt.svcCalls > rt.cfg.maxSvcCalls:
		return fail(429, "too many service calls: the limit is "+strconv.Itoa(rt.cfg.maxSvcCalls)+" per run")
	case len(params) > MaxPayload:
		return fail(413, "service call parameters are larger than 1 MB")
	}
	rt.nextSeq++
	seq := rt.nextSeq
	if err := rt.emit(&frame{T: frameCall, ID: rt.id, Seq: seq, Method: method, Params: json.RawMessage(params)}); err != nil {
		return fail(502, "service call could not be sent")
	}
	rt.pending[seq] = pendingCall{resolve: resolve, reject: reject}
	return rt.vm.ToValue(p)
}

// deliver settles the promise of an svc call with the parent's reply. The
// returned error is uncatchable (an interrupt) and ends the run.
func (rt *jobRuntime) deliver(f *frame) error {
	pc, ok := rt.pending[f.Seq]
	if !ok {
		return nil
	}
	delete(rt.pending, f.Seq)
	if f.Err != nil {
		e, err := rt.helpers.svcError(goja.Undefined(), rt.vm.ToValue(f.Err.Status), rt.vm.ToValue(f.Err.Message))
		if err != nil {
			return err
		}
		return pc.reject(e)
	}
	v, err := parseJSON(rt.vm, f.Reply)
	if err != nil {
		if !errors.Is(err, errJSONSyntax) && !errors.Is(err, errJSONDepth) && !errors.Is(err, errJSONRange) {
			return err
		}
		e, err := rt.helpers.svcError(goja.Undefined(), rt.vm.ToValue(502), rt.vm.ToValue("the service returned invalid JSON"))
		if err != nil {
			return err
		}
		return pc.reject(e)
	}
	return pc.resolve(v)
}

// svcReply runs one call of a worker in the parent and returns the reply
// frame. Errors other than *SvcError are not shown to the code.
func svcReply(ctx context.Context, svc Svc, f *frame) *frame {
	reply := &frame{T: frameReply, ID: f.ID, Seq: f.Seq}
	fail := func(status int, msg string) *frame {
		reply.Err = &errFrame{Kind: KindRuntime, Status: status, Message: msg}
		return reply
	}
	if svc == nil {
		return fail(400, "this run has no service client")
	}
	if !svcMethods[f.Method] {
		return fail(400, "unknown service method")
	}
	if len(f.Params) > MaxPayload || !json.Valid(f.Params) {
		return fail(400, "invalid service call parameters")
	}
	out, err := callSvc(ctx, svc, f.Method, f.Params)
	if err != nil {
		var se *SvcError
		if errors.As(err, &se) {
			status := se.Status
			if status < 400 || status > 599 {
				status = 500
			}
			return fail(status, truncate(se.Message, maxMessage))
		}
		if ctx.Err() != nil {
			return fail(499, "the run ended before the service call finished")
		}
		return fail(500, "service call failed")
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(out) > MaxPayload || !json.Valid(out) {
		return fail(502, "the service returned an invalid response")
	}
	reply.Reply = out
	return reply
}

// callSvc calls svc, turning a panic into an error.
func callSvc(ctx context.Context, svc Svc, method string, params json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if x := recover(); x != nil {
			out, err = nil, errors.New("svc panicked")
		}
	}()
	return svc.Call(ctx, method, params)
}
