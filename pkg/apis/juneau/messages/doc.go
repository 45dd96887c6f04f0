// Package messages is how juneau writes its messages (webhook denials, conditions,
// Events and the log lines quoting them), in one place for every component:
//
//   - names are written one way everywhere (docs/reference.md#messages): quoted,
//     sorted, each once, at most MaxNamed of them before "and N more" (Names, Kinds);
//   - what is said about bad input stays small whatever the input's size
//     (docs/reference.md#limits): error lists name at most MaxErrors errors and count
//     the rest, quoted values are cut to MaxValue bytes, and whole messages to
//     MaxMessage bytes, each cut saying how much it left out (Cut, Errors, OfErrors).
package messages
