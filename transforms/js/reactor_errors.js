// The errors module of reactor and transform code
// (@basis-theory/basis-theory-reactor-formulas-sdk-js): throwing one of
// these sets the HTTP status of the failed run. The message is fixed per
// type; the argument becomes the "errors" map of the problem details.
(function () {
  'use strict';
  const fallback = 'Something went wrong. Please try again. If the problem persists, please contact support.';

  function text(v) {
    if (typeof v === 'object' && v !== null) {
      try {
        return JSON.stringify(v);
      } catch (e) {
        return fallback;
      }
    }
    return v === undefined || v === null || v === '' ? fallback : String(v);
  }

  // errorsMap turns what the code passed into {property: [messages]}.
  function errorsMap(errors) {
    const out = {};
    if (Array.isArray(errors)) {
      out.error = errors.map(text);
    } else if (typeof errors === 'string') {
      out.error = [errors];
    } else if (errors !== null && typeof errors === 'object') {
      for (const k of Object.keys(errors)) {
        const v = errors[k];
        out[k] = Array.isArray(v) ? v.map(text) : [text(v)];
      }
    } else if (errors !== undefined && errors !== null) {
      out.error = [String(errors)];
    } else {
      out.error = [fallback];
    }
    return out;
  }

  class BasisTheoryReactorError extends Error {
    constructor(options) {
      const o = options !== null && typeof options === 'object' ? options : { message: options };
      super(o.message === undefined ? 'Reactor Error' : String(o.message));
      this.name = 'BasisTheoryReactorError';
      this.status = typeof o.status === 'number' ? o.status : 500;
      this.errors = errorsMap(o.errors === undefined ? o.data : o.errors);
    }
    toRFC7807() {
      return { detail: this.message, status: this.status, errors: this.errors };
    }
  }

  function kind(name, status, message) {
    const C = class extends BasisTheoryReactorError {
      constructor(errors) {
        super({ message: message, status: status, errors: errors });
        this.name = name;
      }
    };
    Object.defineProperty(C, 'name', { value: name });
    return C;
  }

  class CustomHttpResponseError extends Error {
    constructor(options) {
      const o = options !== null && typeof options === 'object' ? options : {};
      super('Custom HTTP Response');
      this.name = 'CustomHttpResponseError';
      const status = Number.parseInt(o.status);
      if (status !== o.status || status < 100 || status > 599) {
        throw new Error('status is not a valid integer');
      }
      this.status = status;
      this.headers = o.headers === undefined || o.headers === null ? {} : o.headers;
      this.body = o.body === undefined || o.body === null ? {} : o.body;
    }
    toResponseBody() {
      return { status: this.status, headers: this.headers, body: this.body };
    }
  }

  class InvalidReactorConfigurationError extends BasisTheoryReactorError {
    constructor(propertyName, propertyError) {
      const errors = {};
      errors[String(propertyName)] = [text(propertyError)];
      super({ message: 'Invalid Reactor Configuration', status: 400, errors: errors });
      this.name = 'InvalidReactorConfigurationError';
    }
  }

  class ReactorRuntimeError extends BasisTheoryReactorError {
    constructor(error) {
      super({ message: 'Reactor Runtime Error', status: 500, errors: error instanceof Error ? error.message : error });
      this.name = 'ReactorRuntimeError';
      if (error && typeof error.status === 'number') this.status = error.status;
    }
  }

  return {
    BasisTheoryReactorError,
    AuthenticationError: kind('AuthenticationError', 401, 'Authentication Failed'),
    AuthorizationError: kind('AuthorizationError', 403, 'Forbidden'),
    BadRequestError: kind('BadRequestError', 400, 'Bad Request'),
    InvalidPaymentMethodError: kind('InvalidPaymentMethodError', 402, 'Invalid Payment Method'),
    RateLimitError: kind('RateLimitError', 429, 'Rate Limit Exceeded'),
    ServiceUnavailableError: kind('ServiceUnavailableError', 503, 'Service Unavailable'),
    InvalidReactorConfigurationError,
    ReactorRuntimeError,
    CustomHttpResponseError,
  };
})
