package strictjson

import (
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A plan describes, for one Go type, where encoding/json would decode object
// members into struct fields. The scanner follows plans alongside the body to
// find member names that encoding/json would match case-insensitively.
// A nil *plan means "nothing below this point is decoded into a struct".
type plan struct {
	kind   planKind
	elem   *plan               // planMap, planSeq: plan of the elements
	fields map[string]*plan    // planStruct: exact JSON field name -> plan of its value
	folded map[string]struct{} // planStruct: folded JSON field names
}

type planKind uint8

const (
	planStruct planKind = iota + 1
	planMap
	planSeq
)

var (
	planCache sync.Map // reflect.Type -> *plan (possibly nil)
	planMu    sync.Mutex

	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// rootPlan returns the plan for decoding into the non-nil pointer rv,
// following non-nil interface values the way encoding/json does.
func rootPlan(rv reflect.Value) *plan {
	for {
		switch rv.Kind() {
		case reflect.Pointer:
			if customUnmarshal(rv.Type()) {
				return nil
			}
			if rv.IsNil() {
				return planFor(rv.Type().Elem())
			}
			rv = rv.Elem()
		case reflect.Interface:
			if rv.IsNil() {
				return nil
			}
			e := rv.Elem()
			if e.Kind() != reflect.Pointer || e.IsNil() {
				return nil
			}
			rv = e
		default:
			return planFor(rv.Type())
		}
	}
}

// customUnmarshal reports whether encoding/json hands values of type t (or
// *t) to an UnmarshalJSON or UnmarshalText method.
func customUnmarshal(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshalerType) || pt.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

// planFor returns the (cached) plan for decoding into a value of type t.
func planFor(t reflect.Type) *plan {
	if p, ok := planCache.Load(t); ok {
		return p.(*plan)
	}
	planMu.Lock()
	defer planMu.Unlock()
	if p, ok := planCache.Load(t); ok {
		return p.(*plan)
	}
	b := planBuilder{building: map[reflect.Type]*plan{}}
	root := b.build(t)

	// Prune plans under which no struct is decoded, so that the scanner does
	// no work for them. Element chains are linear, so a chain that revisits
	// a plan without meeting a struct never meets one.
	needed := func(p *plan) bool {
		for steps := 0; p != nil && steps <= len(b.building); steps++ {
			if p.kind == planStruct {
				return true
			}
			p = p.elem
		}
		return false
	}
	keep := map[*plan]bool{}
	for _, p := range b.building {
		keep[p] = needed(p)
	}
	isKept := func(p *plan) bool {
		if p == nil {
			return false
		}
		if k, ok := keep[p]; ok {
			return k
		}
		return true // from an earlier build: already pruned
	}
	for _, p := range b.building {
		if !isKept(p.elem) {
			p.elem = nil
		}
		for name, c := range p.fields {
			if !isKept(c) {
				p.fields[name] = nil
			}
		}
	}
	for bt, p := range b.building {
		if !keep[p] {
			p = nil
		}
		planCache.Store(bt, p)
	}
	if !isKept(root) {
		root = nil
	}
	planCache.Store(t, root)
	return root
}

type planBuilder struct {
	building map[reflect.Type]*plan
}

func (b *planBuilder) build(t reflect.Type) *plan {
	for {
		if customUnmarshal(t) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		t = t.Elem()
	}
	if p, ok := planCache.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := b.building[t]; ok {
		return p
	}
	switch t.Kind() {
	case reflect.Struct:
		p := &plan{kind: planStruct, fields: map[string]*plan{}, folded: map[string]struct{}{}}
		b.building[t] = p
		for _, f := range jsonFields(t) {
			p.fields[f.name] = b.build(f.typ)
			p.folded[string(appendFolded(nil, []byte(f.name)))] = struct{}{}
		}
		return p
	case reflect.Map:
		p := &plan{kind: planMap}
		b.building[t] = p
		p.elem = b.build(t.Elem())
		return p
	case reflect.Slice, reflect.Array:
		p := &plan{kind: planSeq}
		b.building[t] = p
		p.elem = b.build(t.Elem())
		return p
	}
	return nil
}

// jsonField is a struct field as seen by encoding/json.
type jsonField struct {
	name  string
	tag   bool
	index []int
	typ   reflect.Type
}

// jsonFields returns the fields encoding/json decodes into for struct type t,
// following the rules of encoding/json's typeFields: embedded structs are
// flattened, json tags rename or hide fields, and conflicting names are
// resolved by depth and tagging, or dropped.
func jsonFields(t reflect.Type) []jsonField {
	current := []jsonField{}
	next := []jsonField{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []jsonField

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				index := make([]int, len(f.index)+1)
				copy(index, f.index)
				index[len(f.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					fields = append(fields, jsonField{name: name, tag: tagged, index: index, typ: sf.Type})
					if count[f.typ] > 1 {
						// Several embeddings at this level: add a second copy so
						// that the conflict is detected below.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, jsonField{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b jsonField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tag != b.tag {
			if a.tag {
				return -1
			}
			return +1
		}
		return slices.Compare(a.index, b.index)
	})

	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fi)
			continue
		}
		// The first field dominates unless the second is at the same depth
		// with the same tagging, in which case the name is dropped.
		if len(fields[i].index) == len(fields[i+1].index) && fields[i].tag == fields[i+1].tag {
			continue
		}
		out = append(out, fi)
	}
	return out
}

// isValidTag mirrors encoding/json's check of a json tag name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// appendFolded appends the case-folded form of name used by encoding/json for
// case-insensitive field matching: equal results iff bytes.EqualFold.
func appendFolded(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

// foldRune returns the smallest rune of r's simple case-folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
