// Package importer stores conversation transcripts and event files in
// convlog through a client, and checks imported threads against their
// source: the work of agentd import and agentd verify.
//
// A transcript file is OpenAI-format JSONL, one conversation a line
// (internal/transcripts reads it); each conversation becomes one thread
// (client.ImportConversation), with deterministic thread and event ids,
// so importing a file twice stores nothing twice. An event file holds raw
// events as agentd thread export --format events writes them
// (client.ImportEvents). A progress function, when given, is called with
// the bytes of the files read so far: an estimate within a file, exact at
// each file's end. The functions are called from one goroutine each and
// return when ctx ends.
package importer
