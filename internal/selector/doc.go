// Package selector parses and evaluates Calico's label selector language and converts
// Kubernetes label selectors (their matchLabels and matchExpressions, in the package's own
// Requirement type: it depends on no Kubernetes package) into it exactly. internal/sync converts
// API selectors with FromLabelSelector/Parse; internal/graph matches them against endpoint labels (Evaluate, with
// RequiredEqualities/RequiredKeys as label-index hints).
//
// Language: k == 'v', k != 'v' (true when k is absent), k in {...}, k not in {...} (true when
// absent), has(k), !expr, all(), &&, ||, parentheses, contains / starts with / ends with.
// Precedence ! > && > ||. Literals in single or double quotes, no escapes.
//
// Canonical form: literals in double quotes (single if the value holds a double quote), in-sets
// sorted and deduplicated, && and || flattened (operand order kept as written), all() dropped from
// &&, double negation removed, minimal parentheses. ID is the first 16 chars of lowercased
// unpadded base32 of sha256(String()). A Selector is immutable; Evaluate does not allocate.
//
// FromLabelSelector: no labels and no requirements give All() (callers decide what a missing
// selector means); matchLabels k: v is
// k == "v" (a label set without k never matches, even for v ""); NotIn matches an absent key;
// DoesNotExist is !has(k); unknown operators or bad values are errors.
package selector
