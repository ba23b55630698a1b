package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"
)

// Defaults of RedisOptions.
const (
	// DefaultRedisTimeout bounds one call to Redis: a slow Redis costs a
	// request at most this long before the node decides on its own.
	DefaultRedisTimeout = 100 * time.Millisecond
	// DefaultRedisRetryMin is how long Redis is left alone after it first
	// fails; the wait doubles with each failed probe up to
	// DefaultRedisRetryMax.
	DefaultRedisRetryMin = 250 * time.Millisecond
	// DefaultRedisRetryMax bounds the wait between probes of a Redis that
	// does not answer.
	DefaultRedisRetryMax = 10 * time.Second
)

// RedisOptions configure the state that Limiters of several nodes share in
// Redis.
type RedisOptions struct {
	// Client runs the limiter's script, usually a *redis.Client. Its owner
	// closes it.
	Client redis.Scripter
	// Prefix starts every key the limiters write, so that several clusters
	// (or other users of the same Redis) keep apart.
	Prefix string
	// Timeout bounds each call to Redis; 0 means DefaultRedisTimeout.
	Timeout time.Duration
	// RetryMin and RetryMax bound how long Redis is left alone after a
	// failure before one decision probes it again; 0 means the defaults.
	RetryMin, RetryMax time.Duration
	// Logger gets one line when Redis stops answering and one when it
	// answers again; nil logs nothing.
	Logger *zap.Logger
	// OnState, when set, is called with false when decisions fall back to
	// the local limiter and with true when they go to Redis again.
	OnState func(up bool)
	// OnLocal, when set, is called for every decision the local limiter
	// makes because Redis is unreachable.
	OnLocal func()
}

// Redis is the rate limit state that the Limiters of every node of a
// cluster share: one counter per rule and client in Redis, checked and
// charged by one script call per request. It is safe for concurrent use,
// and meant to be shared by all the Limiters that use one Redis, so that
// they agree on whether Redis is up.
type Redis struct {
	client  redis.Scripter
	prefix  string
	timeout time.Duration
	circuit circuit
	onLocal func()
}

// NewRedis returns shared state in the Redis that o describes.
func NewRedis(o RedisOptions) (*Redis, error) {
	if o.Client == nil {
		return nil, errors.New("ratelimit: RedisOptions.Client is required")
	}
	if o.Timeout < 0 || o.RetryMin < 0 || o.RetryMax < 0 {
		return nil, errors.New("ratelimit: negative Redis timeout or retry interval")
	}
	r := &Redis{client: o.Client, prefix: o.Prefix, timeout: o.Timeout, onLocal: o.OnLocal}
	if r.timeout == 0 {
		r.timeout = DefaultRedisTimeout
	}
	if r.onLocal == nil {
		r.onLocal = func() {}
	}
	logger := o.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	onState := o.OnState
	if onState == nil {
		onState = func(bool) {}
	}
	c := &r.circuit
	c.min, c.max, c.now = o.RetryMin, o.RetryMax, time.Now
	if c.min == 0 {
		c.min = DefaultRedisRetryMin
	}
	if c.max == 0 {
		c.max = max(DefaultRedisRetryMax, c.min)
	}
	if c.max < c.min {
		return nil, errors.New("ratelimit: RetryMax is below RetryMin")
	}
	c.onDown = func(err error) {
		logger.Error("redis does not answer: each node enforces rate limits on its own until it does", zap.Error(err))
		onState(false)
	}
	c.onUp = func() {
		logger.Info("redis answers again: rate limits are shared across nodes")
		onState(true)
	}
	return r, nil
}

// Up reports whether decisions go to Redis: true until a call fails, then
// false until a probe succeeds.
func (s *Redis) Up() bool { return s.circuit.isUp() }

// allowScript decides a request against several counters at once, all or
// nothing, with the same semantics as the local limiter (see the package
// doc), as a generic cell rate algorithm: a counter is a hash holding its
// theoretical arrival time t (when its bucket would be full again, in
// microseconds) and, for a block rule, the end of its block b. A missing
// counter is a full bucket. All arithmetic is on whole microseconds, exact in
// Lua's doubles.
//
// KEYS[i] is counter i. ARGV[1] is the time in microseconds since the Unix
// epoch, or "" for the Redis server's clock (the one clock every node agrees
// on). ARGV[2] is how many milliseconds a counter outlives its idle time
// before Redis expires it. Then three arguments per counter: the emission
// interval (Per/Limit) in microseconds, the limit, and the block in
// microseconds (0: throttle).
//
// It returns {allowed, then per counter: state, remaining, reset, retry},
// state 0 charged, 1 rejecting, 2 would have allowed; durations in
// microseconds.
var allowScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local margin = tonumber(ARGV[2])
local n = #KEYS
local tat, blk, step, lim, blo = {}, {}, {}, {}, {}
local ok = true
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  step[i], lim[i], blo[i] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local v = redis.call('HMGET', KEYS[i], 't', 'b')
  tat[i] = math.max(tonumber(v[1]) or now, now)
  blk[i] = tonumber(v[2]) or 0
  if now < blk[i] or tat[i] - now > (lim[i] - 1) * step[i] then
    ok = false
  end
end
local function keep(i)
  redis.call('PEXPIRE', KEYS[i], math.ceil((math.max(tat[i], blk[i]) - now) / 1000) + margin)
end
local out = {ok and 1 or 0}
for i = 1, n do
  local state, remaining, reset, retry = 2, 0, 0, 0
  local wait = tat[i] - now - (lim[i] - 1) * step[i]
  local blocked = now < blk[i]
  if ok then
    tat[i] = tat[i] + step[i]
    redis.call('HSET', KEYS[i], 't', string.format('%d', tat[i]))
    keep(i)
    state, reset = 0, tat[i] - now
    remaining = math.floor(lim[i] - reset / step[i])
  elseif blocked or wait > 0 then
    if not blocked and blo[i] > 0 then
      blk[i], blocked = now + blo[i], true
      redis.call('HSET', KEYS[i], 'b', string.format('%d', blk[i]))
      keep(i)
    end
    state, reset, retry = 1, tat[i] - now, math.max(wait, 0)
    if blocked then
      reset = blk[i] - now
      retry = math.max(retry, reset)
    end
  end
  out[#out + 1] = state
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
`)

// injectedClockMargin is how long, in milliseconds, a counter outlives its
// idle time in Redis when the Limiter runs on an injected clock (tests):
// Redis expires keys on the wall clock, which may run ahead of the injected
// one.
const injectedClockMargin = "3600000"

// redisRule is what the script needs of one rule, formatted once.
type redisRule struct {
	keyPrefix string // prefix, rule name, ":"
	params    string // hashed with the counter key, see redisKey
	args      [3]string
}

func newRedisRule(prefix string, r Rule) redisRule {
	step := max(r.Per.Microseconds()/int64(r.Limit), 1)
	rr := redisRule{
		keyPrefix: prefix + r.Name + ":",
		args:      [3]string{strconv.FormatInt(step, 10), strconv.Itoa(r.Limit), strconv.FormatInt(r.Block.Microseconds(), 10)},
	}
	rr.params = rr.args[0] + "/" + rr.args[1] + "/" + rr.args[2] + "\x00"
	return rr
}

// redisKey names the counter of key under rule rr. The counter key holds
// client addresses and API key ids, so Redis sees only a hash of it. The
// rule's parameters are hashed in too: nodes (or handlers) that enforce the
// same rule with different limits keep separate counters, as each keeps its
// own locally.
func (rr *redisRule) redisKey(counter string) string {
	h := sha256.New()
	h.Write([]byte(rr.params))
	h.Write([]byte(counter))
	var sum [sha256.Size]byte
	return rr.keyPrefix + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// allowShared decides r in Redis. ok=false means Redis was not asked or did
// not answer, and the caller decides locally.
func (l *Limiter) allowShared(r *Request) (d Decision, ok bool) {
	var buf [stackHits]int
	hits := buf[:0]
	var keys []string
	for i, s := range l.stores {
		if !s.rule.Match(r) {
			continue
		}
		key, ok := s.rule.Counter(r)
		if !ok {
			continue
		}
		hits = append(hits, i)
		keys = append(keys, l.redisRules[i].redisKey(key))
	}
	if len(hits) == 0 {
		return Decision{Allowed: true}, true
	}
	s := l.redis
	callOK, probe := s.circuit.acquire()
	if !callOK {
		return Decision{}, false
	}
	args := make([]any, 0, 2+3*len(hits))
	if l.injectedClock {
		// Redis expires keys on its own clock, which an injected clock
		// does not move: keep counters well past their idle time.
		args = append(args, strconv.FormatInt(l.now().UnixMicro(), 10), injectedClockMargin)
	} else {
		args = append(args, "", "1")
	}
	for _, i := range hits {
		for _, a := range l.redisRules[i].args {
			args = append(args, a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	res, err := allowScript.Run(ctx, s.client, keys, args...).Int64Slice()
	cancel()
	if err == nil && len(res) != 1+4*len(hits) {
		err = fmt.Errorf("ratelimit: the redis script returned %d values for %d counters", len(res), len(hits))
	}
	s.circuit.report(probe, err)
	if err != nil {
		return Decision{}, false
	}
	return l.sharedDecision(hits, res), true
}

// sharedDecision reads the script's answer the way admit and reject report
// a local decision.
func (l *Limiter) sharedDecision(hits []int, res []int64) Decision {
	d := Decision{Allowed: res[0] == 1}
	found := false
	for j, i := range hits {
		rule := &l.stores[i].rule
		state, remaining := res[1+4*j], int(res[2+4*j])
		reset, retry := time.Duration(res[3+4*j])*time.Microsecond, time.Duration(res[4+4*j])*time.Microsecond
		switch {
		case d.Allowed:
			if !found || remaining < d.Remaining || remaining == d.Remaining && reset > d.Reset {
				d.Rule, d.Limit, d.Remaining, d.Reset = rule.Name, rule.Limit, remaining, reset
			}
		case state == 1:
			if !found || retry > d.RetryAfter {
				d.Rule, d.Limit, d.Reset, d.RetryAfter = rule.Name, rule.Limit, reset, retry
			}
		default:
			continue
		}
		found = true
	}
	return d
}

// RedisClientOptions parses a redis:// or rediss:// URL (a password, a
// database and query options as go-redis reads them) into client options fit
// for rate limiting: every dial, read, write and wait for a pooled connection
// is bounded by timeout (0: DefaultRedisTimeout), and nothing is retried, so a
// slow or absent Redis costs a request one timeout at most. Errors never
// quote the URL, which may hold a password.
func RedisClientOptions(rawURL string, timeout time.Duration) (*redis.Options, error) {
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("redis url: not a valid URL")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, errors.New("redis url: the scheme must be redis or rediss")
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		msg := err.Error()
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxx")
		}
		return nil, fmt.Errorf("redis url: %s", msg)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return o, nil
}
