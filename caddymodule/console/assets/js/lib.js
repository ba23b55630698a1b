// The console's view layer: Preact with htm tagged templates (vendored,
// see ../vendor/VENDOR.md). No JSX, so no build step.
import { h, render, Fragment } from '../vendor/preact.mjs';
import htm from '../vendor/htm.mjs';

export { render, Fragment };
export { useState, useEffect, useRef, useCallback, useMemo } from '../vendor/hooks.mjs';
export const html = htm.bind(h);
