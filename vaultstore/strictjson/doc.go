// Package strictjson is the hardened front door for every JSON request body
// accepted by the Tokenvault REST API (security requirements R-IN-1..4).
//
// A body is processed in three steps:
//
//  1. [ReadBody] reads it with a hard size cap and reports oversize bodies as
//     [ErrTooLarge] (mapped to HTTP 413 by the edge).
//  2. [Validate] pre-scans it with an iterative (non-recursive) scanner that
//     rejects syntax errors, trailing data, invalid UTF-8, unpaired UTF-16
//     surrogate escapes, duplicate object member names, excessive nesting and
//     excessive value counts. Its cost is linear in the size of the body and
//     its stack usage is constant, whatever the input.
//  3. [Decode] / [DecodeValue] run Validate and then decode with
//     encoding/json using UseNumber, so numbers held in interface values keep
//     their exact textual form.
//
// Every error except [ErrTooLarge] is an [*Error] carrying the JSON path of
// the offending member and a short, lowercase message. Messages never contain
// the offending value (bodies carry card numbers); they may quote member
// names, and member names appear in paths.
//
// # Member name matching
//
// encoding/json matches object member names to struct fields
// case-insensitively (with Unicode simple folding, so "\u212aind" matches a
// field named "kind"). Decode does not: a member whose name is not exactly the
// JSON name of a field of the target struct, but would be matched to one
// case-insensitively by encoding/json, is treated as an unknown member and
// ignored, like any other unknown member. Hence {"name":"a","Name":"b"}
// decodes Name as "a", and {"NAME":"b"} leaves it empty. The scanner itself
// always compares member names byte-exactly, so case variants are never
// duplicates of each other.
//
// Case-sensitive matching is decided from static types. One dynamic case is
// not covered: an interface-typed field (other than the decode target itself)
// that already holds a non-nil pointer to a struct when Decode is called is
// filled by encoding/json with its usual case-insensitive matching.
package strictjson
