// bootstrap runs in every fresh runtime, before any tenant code. It sets up
// the Node-like globals, takes away code generation from strings, freezes
// every intrinsic reachable from the global object, locks the global
// object's bindings, and returns the helpers the Go side uses. Everything
// it captures is captured before tenant code can touch it.
//
// With deep set (or after deepen), the realm is meant to serve many runs (of one tenant,
// principal and code): every object reachable from the global object is
// frozen, method functions included, so that no run can leave anything
// behind in an intrinsic; reset, called after each run, removes what a
// run added to the global object and says whether the realm is still as
// bootstrap left it.
(function bootstrap(host, Buffer, url, deep) {
  'use strict';
  const G = globalThis;
  const { freeze, getPrototypeOf, getOwnPropertyDescriptor, defineProperty, isFrozen, isExtensible } = Object;
  const { ownKeys, apply, deleteProperty } = Reflect;
  const jsonParse = JSON.parse;
  const jsonStringify = JSON.stringify;
  const promiseResolve = Promise.resolve;
  const PromiseCtor = Promise;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const SyntaxErrorCtor = SyntaxError;
  const EvalErrorCtor = EvalError;
  const StringCtor = String;
  const hasOwn = Object.prototype.hasOwnProperty;
  const objectToString = Object.prototype.toString;
  const WeakSetCtor = WeakSet;
  const weakSetAdd = WeakSet.prototype.add;
  const weakSetHas = WeakSet.prototype.has;
  // A Set, not a WeakSet, for the intrinsics: they live as long as the
  // realm anyway, and goja's WeakSet costs a weak pointer and a cleanup
  // per entry.
  const SetCtor = Set;
  const setAdd = Set.prototype.add;
  const setHas = Set.prototype.has;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const MAX_TEXT = 1024;

  function str(v) {
    let s;
    try {
      s = typeof v === 'symbol' ? apply(Symbol.prototype.toString, v, []) : StringCtor(v);
    } catch (e) {
      s = '[unprintable value]';
    }
    return s.length > MAX_TEXT ? apply(stringSlice, s, [0, MAX_TEXT]) : s;
  }

  // JSON.parse refuses input nested deeper than the host allows: goja's
  // parser recurses in Go, and "[".repeat(5e6) would overflow the Go stack
  // and kill the worker.
  const depthOK = host.jsonDepthOK;
  function parse(text, reviver) {
    const s = StringCtor(text);
    if (!depthOK(s)) {
      throw new SyntaxErrorCtor('JSON nesting is deeper than ' + host.maxJSONDepth + ' levels');
    }
    return reviver === undefined ? jsonParse(s) : apply(jsonParse, JSON, [s, reviver]);
  }
  defineProperty(JSON, 'parse', { value: parse, writable: true, enumerable: false, configurable: true });

  // console: every method writes one line to the host, which bounds the
  // line length and the number of lines.
  const hostLog = host.log;
  function format(v) {
    switch (typeof v) {
      case 'string':
        return v;
      case 'undefined':
        return 'undefined';
      case 'function':
        return '[Function: ' + (str(v.name) || '(anonymous)') + ']';
      case 'symbol':
        return str(v);
      case 'bigint':
        return str(v) + 'n';
      case 'number':
      case 'boolean':
        return StringCtor(v);
    }
    if (v === null) return 'null';
    if (v instanceof ErrorCtor) return str(v.stack || v);
    try {
      const s = jsonStringify(v);
      return s === undefined ? str(v) : s;
    } catch (e) {
      return str(v);
    }
  }
  function makeLog() {
    return function log(...args) {
      let line = '';
      for (let i = 0; i < args.length && line.length <= MAX_TEXT; i++) {
        line += (i ? ' ' : '') + format(args[i]);
      }
      hostLog(line);
    };
  }
  const consoleObject = {
    log: makeLog(), info: makeLog(), warn: makeLog(), error: makeLog(), debug: makeLog(), trace: makeLog(),
  };

  // No code generation from strings: eval, Function and the constructors
  // of async and generator functions throw. instanceof Function still
  // works because the replacement keeps Function.prototype.
  function disable(proto, name) {
    const f = function () {
      throw new EvalErrorCtor(name + ' is disabled in transforms');
    };
    defineProperty(f, 'name', { value: name });
    defineProperty(f, 'prototype', { value: proto, writable: false, enumerable: false, configurable: false });
    defineProperty(proto, 'constructor', { value: f, writable: true, enumerable: false, configurable: true });
    return f;
  }
  const FunctionPrototype = Function.prototype;
  const disabledFunction = disable(FunctionPrototype, 'Function');
  disable(getPrototypeOf(async function () {}), 'AsyncFunction');
  disable(getPrototypeOf(function* () {}), 'GeneratorFunction');
  const disabledEval = function () {
    throw new EvalErrorCtor('eval is disabled in transforms');
  };
  defineProperty(disabledEval, 'name', { value: 'eval' });

  // Node-like globals.
  const globals = {
    Function: disabledFunction,
    eval: disabledEval,
    console: consoleObject,
    Buffer: Buffer,
    URL: url.URL,
    URLSearchParams: url.URLSearchParams,
    global: G,
  };
  const globalNames = ownKeys(globals);
  for (let i = 0; i < globalNames.length; i++) {
    const k = globalNames[i];
    defineProperty(G, k, { value: globals[k], writable: true, enumerable: false, configurable: true });
  }

  // Symbol.for registers its key in the realm for the realm's lifetime;
  // goja never forgets it. A realm that serves many runs must not grow
  // without bound, so past a budget (keys and their characters, counted
  // over the realm's life) the realm is marked spent: the run goes on, and
  // the realm is dropped after it.
  const symbolFor = Symbol.for;
  let symbolCalls = 0;
  let symbolChars = 0;
  let spent = false;
  const registerSymbol = function (key) {
    const k = StringCtor(key);
    symbolCalls++;
    symbolChars += k.length;
    if (symbolCalls > 10000 || symbolChars > 1048576) spent = true;
    return apply(symbolFor, Symbol, [k]);
  };
  defineProperty(registerSymbol, 'name', { value: 'for' });
  defineProperty(Symbol, 'for', { value: registerSymbol, writable: true, enumerable: false, configurable: true });

  // The "override mistake": once a prototype is frozen, assigning a
  // property it has (err.name = 'X', obj.toString = f) fails on every
  // object that inherits it. As SES does, the commonly overridden
  // properties become accessors whose setter defines an own property on
  // the receiver, and refuses to change the prototype itself.
  const tamedValues = []; // reachable only through the getters: frozen below
  function tame(obj, name) {
    const d = getOwnPropertyDescriptor(obj, name);
    if (!d || !('value' in d) || !d.configurable) return;
    const value = d.value;
    tamedValues.push(value);
    defineProperty(obj, name, {
      get: function () { return value; },
      set: function (v) {
        if (this === obj) {
          throw new TypeErrorCtor("Cannot assign to read only property '" + str(name) + "' of a frozen built-in");
        }
        defineProperty(this, name, { value: v, writable: true, enumerable: true, configurable: true });
      },
      enumerable: d.enumerable,
      configurable: false,
    });
  }
  const common = ['constructor', 'toString', 'valueOf', 'toLocaleString'];
  const tamed = [
    [Object.prototype, common.concat(['hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable'])],
    [FunctionPrototype, ['constructor', 'toString']],
    [Error.prototype, ['constructor', 'name', 'message', 'toString']],
    [Array.prototype, common],
    [Promise.prototype, ['constructor']],
    [String.prototype, common], [Number.prototype, common], [Boolean.prototype, common],
    [Symbol.prototype, common], [RegExp.prototype, common],
    [Date.prototype, common.concat(['toJSON'])], [Map.prototype, common], [Set.prototype, common],
    [Buffer.prototype, common.concat(['toJSON'])],
  ];
  const errorTypes = [EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, AggregateError];
  for (let i = 0; i < errorTypes.length; i++) {
    tamed.push([errorTypes[i].prototype, ['constructor', 'name', 'message']]);
  }
  for (let i = 0; i < tamed.length; i++) {
    const names = tamed[i][1];
    for (let j = 0; j < names.length; j++) tame(tamed[i][0], names[j]);
  }

  // freezeIntrinsic freezes a built-in: the object, its prototype property
  // and the prototype chains of both. The method functions themselves are
  // left extensible: goja creates them lazily, and freezing every one of
  // them would cost about 8 ms per run instead of 1; a property added to
  // one is seen only by the run that added it, which then ends with its
  // realm.
  const frozen = new SetCtor();
  function freezeOne(o) {
    while (o !== null && (typeof o === 'object' || typeof o === 'function') && !apply(setHas, frozen, [o])) {
      apply(setAdd, frozen, [o]);
      freeze(o);
      if (typeof o === 'function') freezeOne(o.prototype);
      o = getPrototypeOf(o);
    }
  }
  // harden freezes an object, its own property values (and accessors) and
  // their prototypes: enough for namespaces (JSON, Math, console) and
  // module exports (classes and their prototypes included).
  function harden(root) {
    freezeOne(root);
    if (root === null || (typeof root !== 'object' && typeof root !== 'function')) return root;
    const keys = ownKeys(root);
    for (let i = 0; i < keys.length; i++) {
      const d = getOwnPropertyDescriptor(root, keys[i]);
      if ('value' in d) freezeOne(d.value);
      else {
        freezeOne(d.get);
        freezeOne(d.set);
      }
    }
    return root;
  }
  // Intrinsics that no global names.
  const hidden = [
    getPrototypeOf(function* () {}),
    getPrototypeOf((function* () {})()),
    getPrototypeOf(async function () {}),
    getPrototypeOf([][Symbol.iterator]()),
    getPrototypeOf(new Map()[Symbol.iterator]()),
    getPrototypeOf(new Set()[Symbol.iterator]()),
    getPrototypeOf(''[Symbol.iterator]()),
    getPrototypeOf(/a/[Symbol.matchAll]('a')),
    getPrototypeOf(new url.URLSearchParams('')[Symbol.iterator]()),
  ];
  const throwers = [
    getOwnPropertyDescriptor(FunctionPrototype, 'caller'),
    (function () { 'use strict'; return getOwnPropertyDescriptor(arguments, 'callee'); })(),
  ];
  // deepFreeze freezes everything reachable from its roots through own
  // properties (values, getters, setters) and prototypes, skipping what an
  // earlier call walked. A function's name and length are primitives and
  // are not read.
  const walked = new SetCtor();
  function deepFreeze(roots) {
    const queue = roots;
    while (queue.length > 0) {
      const o = queue.pop();
      if (o === null || (typeof o !== 'object' && typeof o !== 'function') || o === G || apply(setHas, walked, [o])) continue;
      apply(setAdd, walked, [o]);
      apply(setAdd, frozen, [o]);
      freeze(o);
      queue.push(getPrototypeOf(o));
      const fn = typeof o === 'function';
      const keys = ownKeys(o);
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if (fn && (k === 'name' || k === 'length')) continue;
        const d = getOwnPropertyDescriptor(o, k);
        if ('value' in d) queue.push(d.value);
        else {
          queue.push(d.get);
          queue.push(d.set);
        }
      }
    }
  }

  const globalKeys = ownKeys(G);
  // freezeAll freezes every intrinsic deep: what a realm that serves many
  // runs needs. A realm set up without it (for one run) can still be
  // deepened before its first run (deepen below).
  function freezeAll() {
    const roots = [url].concat(tamedValues);
    for (let i = 0; i < globalKeys.length; i++) roots.push(G[globalKeys[i]]);
    for (let i = 0; i < hidden.length; i++) roots.push(hidden[i]);
    for (let i = 0; i < throwers.length; i++) {
      if (throwers[i]) roots.push(throwers[i].get, throwers[i].set);
    }
    deepFreeze(roots);
  }
  if (deep) {
    freezeAll();
  } else {
    for (let i = 0; i < globalKeys.length; i++) {
      const k = globalKeys[i];
      const v = G[k]; // the global object has data properties only
      if (v === G) continue;
      if (k === 'JSON' || k === 'Math' || k === 'Reflect' || k === 'console') harden(v);
      else freezeOne(v);
    }
    for (let i = 0; i < hidden.length; i++) freezeOne(hidden[i]);
    for (let i = 0; i < throwers.length; i++) {
      const d = throwers[i];
      if (d) {
        freezeOne(d.get);
        freezeOne(d.set);
      }
    }
  }

  // The global object stays extensible (code may create globals), but its
  // own bindings — the built-ins above — can no longer be replaced or
  // deleted: JSON = ..., delete globalThis.Object fail (silently in sloppy
  // code, with a TypeError in strict code).
  for (let i = 0; i < globalKeys.length; i++) {
    const k = globalKeys[i];
    const d = getOwnPropertyDescriptor(G, k);
    if (d.configurable || d.writable) defineProperty(G, k, { writable: false, configurable: false });
  }
  const baseline = new SetCtor(globalKeys);
  const baselineCount = globalKeys.length;
  const globalProto = getPrototypeOf(G);

  // Errors that the Go side recognises by identity.
  const moduleErrors = new WeakSetCtor();
  function moduleError(message) {
    const e = new ErrorCtor(message);
    defineProperty(e, 'code', { value: 'MODULE_NOT_FOUND', writable: true, enumerable: true, configurable: true });
    apply(weakSetAdd, moduleErrors, [e]);
    return e;
  }
  function svcError(status, message) {
    const e = new ErrorCtor(message);
    defineProperty(e, 'name', { value: 'ServiceError', writable: true, enumerable: false, configurable: true });
    defineProperty(e, 'status', { value: status, writable: true, enumerable: true, configurable: true });
    return e;
  }

  // req.svc: every method sends one call to the parent and returns a
  // promise; parameters cross as JSON text.
  function makeSvc() {
    const call = host.svcCall;
    function send(method, params) {
      const text = jsonStringify(params === undefined ? null : params);
      return call(method, text === undefined ? 'null' : text);
    }
    return harden({
      tokenize: function tokenize(body) { return send('tokenize', body); },
      detokenize: function detokenize(value) { return send('detokenize', value); },
      tokens: {
        create: function create(body) { return send('tokens.create', body); },
        retrieve: function retrieve(id) { return send('tokens.retrieve', { id: id }); },
        update: function update(id, patch) { return send('tokens.update', { id: id, patch: patch }); },
        delete: function (id) { return send('tokens.delete', { id: id }); },
        list: function list(query) { return send('tokens.list', query === undefined ? {} : query); },
      },
    });
  }

  let sdk = null; // the errors module, once required in this run
  let svcObject = null; // req.svc of a reused realm, made once

  // describeError turns a thrown value into JSON for the Go side.
  function describeError(e) {
    const d = { kind: 'runtime', name: '', message: '', status: 0 };
    try {
      if (e !== null && (typeof e === 'object' || typeof e === 'function')) {
        if (apply(weakSetHas, moduleErrors, [e])) {
          d.kind = 'module';
          d.message = str(e.message);
        } else if (sdk !== null && e instanceof sdk.CustomHttpResponseError) {
          d.name = 'CustomHttpResponseError';
          d.status = e.status;
          d.custom = { status: e.status, headers: jsonStringify(e.headers), body: jsonStringify(e.body) };
        } else if (sdk !== null && e instanceof sdk.BasisTheoryReactorError) {
          d.name = str(e.name);
          d.message = str(e.message);
          d.status = e.status;
          d.errors = sanitizeErrors(e.errors);
        } else if (e instanceof ErrorCtor) {
          d.name = str(e.name);
          d.message = str(e.message);
          d.stack = stackFrames(e);
        } else {
          d.message = 'uncaught exception: ' + describeValue(e);
        }
      } else {
        d.message = 'uncaught exception: ' + str(e);
      }
    } catch (err) {
      d.kind = 'runtime';
      d.message = 'the thrown value could not be read';
      d.custom = undefined;
    }
    if (typeof d.status !== 'number') d.status = 0;
    return jsonStringify(d);
  }
  // stackFrames returns the "at" lines of an error's stack, where the Go
  // side finds the position in the tenant's code, or ''.
  function stackFrames(e) {
    try {
      const s = e.stack;
      if (typeof s !== 'string') return '';
      const i = apply(stringIndexOf, s, ['\n\tat ']);
      return i < 0 ? '' : apply(stringSlice, s, [i, i + MAX_TEXT]);
    } catch (err) {
      return '';
    }
  }
  function describeValue(v) {
    try {
      const s = jsonStringify(v);
      if (typeof s === 'string') return s.length > MAX_TEXT ? apply(stringSlice, s, [0, MAX_TEXT]) : s;
    } catch (e) {
      // fall through
    }
    return apply(objectToString, v, []);
  }
  function sanitizeErrors(errors) {
    const out = {};
    if (errors === null || typeof errors !== 'object') return out;
    // At most 50 properties of 20 messages of 1 KiB: the result frame
    // must stay far below its size limit.
    const keys = ownKeys(errors);
    for (let i = 0, n = 0; i < keys.length && n < 50; i++) {
      const k = keys[i];
      if (typeof k !== 'string') continue;
      n++;
      const v = errors[k];
      const list = Array.isArray(v) ? v : [v];
      const msgs = [];
      for (let j = 0; j < list.length && j < 20; j++) {
        msgs[j] = typeof list[j] === 'object' ? describeValue(list[j]) : str(list[j]);
      }
      out[str(k)] = msgs;
    }
    return out;
  }

  return freeze({
    harden: harden,
    moduleError: moduleError,
    svcError: svcError,
    describeError: describeError,
    parse: parse,
    // makeReq builds req from args and configuration, which the host
    // built from JSON text.
    makeReq: function (args, configuration, hasSvc) {
      const req = { args: args, configuration: configuration };
      if (hasSvc) {
        // In a reused realm req.svc is one deep-frozen object: it holds no
        // state (host.svcCall sends each call for the run under way).
        if (!deep) req.svc = makeSvc();
        else {
          if (svcObject === null) {
            svcObject = makeSvc();
            deepFreeze([svcObject]);
          }
          req.svc = svcObject;
        }
        req.bt = req.svc; // the name Basis Theory transforms use
      }
      return req;
    },
    // deepen freezes a realm set up for one run deep, so that it can serve
    // many: the host calls it before the realm's first run, never after.
    deepen: function () {
      if (!deep) {
        freezeAll();
        deep = true;
      }
    },
    // module runs the CommonJS wrapper of tenant code with a fresh module
    // object and returns its exports.
    module: function (wrapper, require, filename, dirname) {
      const exports = {};
      const module = { exports: exports, id: '.', filename: filename };
      apply(wrapper, exports, [exports, require, module, filename, dirname]);
      return module.exports;
    },
    // reset, after a run, deletes the globals the run created and reports
    // whether the realm is as bootstrap left it: false when a global could
    // not be deleted, the global object's prototype or extensibility was
    // changed, or the realm has spent its Symbol.for budget. (Listing the
    // global object's keys costs a few µs, more than anything else here;
    // no cheaper complete test exists.)
    reset: function () {
      sdk = null;
      let clean = !spent && isExtensible(G) && getPrototypeOf(G) === globalProto;
      const keys = ownKeys(G);
      if (keys.length === baselineCount) return clean; // the baseline cannot be deleted
      if (keys.length > baselineCount + 10000) return false;
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i];
        if (!apply(setHas, baseline, [k]) && !deleteProperty(G, k)) clean = false;
      }
      return clean;
    },
    settle: function (v) {
      return apply(promiseResolve, PromiseCtor, [v]);
    },
    stringify: function (v) {
      return jsonStringify(v);
    },
    loadBuiltin: function (name, factory) {
      const exports = harden(factory(host, Buffer));
      if (name === 'errors') sdk = exports;
      return exports;
    },
    isFrozen: isFrozen,
    hasOwn: function (o, k) { return apply(hasOwn, o, [k]); },
  });
})
