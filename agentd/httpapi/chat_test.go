package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/httpapi"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/events"
)

// sdk is the official OpenAI Go SDK pointed at the test server.
func (e *env) sdk(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(e.srv.URL + "/v1/"), option.WithAPIKey(keyAcme),
		option.WithHTTPClient(e.srv.Client())}
	return openai.NewClient(append(base, opts...)...)
}

// convlogOf reads the "convlog" extension member of a completion.
func convlogOf(t *testing.T, raw string) map[string]any {
	t.Helper()
	var v struct {
		Convlog map[string]any `json:"convlog"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &v))
	require.NotNil(t, v.Convlog, "no convlog member in %s", raw)
	return v.Convlog
}

func TestChatOpenAISDKTwoTurnsLandInOneThread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cl := e.sdk(option.WithHeader("X-Conversation-Id", "conv-colt"))
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are helpful."),
		openai.UserMessage("my name is colt"),
	}
	var httpRes *http.Response
	first, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs}, option.WithResponseInto(&httpRes))
	require.NoError(t, err)
	require.Len(t, first.Choices, 1)
	require.Contains(t, first.Choices[0].Message.Content, `You said: "my name is colt"`)
	require.Contains(t, first.Choices[0].Message.Content, "This thread has 1 message")
	require.Equal(t, "stop", first.Choices[0].FinishReason)
	require.Positive(t, first.Usage.TotalTokens)
	thread := httpRes.Header.Get("X-Convlog-Thread")
	require.Equal(t, "conv-colt", httpRes.Header.Get("X-Conversation-Id"))
	require.Equal(t, "header", httpRes.Header.Get("X-Convlog-Conversation-Tier"))
	key, err := client.ResolveConvKey(client.ConvRequest{Agent: "demo", Header: http.Header{"X-Conversation-Id": {"conv-colt"}}}, client.ConvKeyOptions{})
	require.NoError(t, err)
	require.Equal(t, key.ThreadID(), thread)
	info := convlogOf(t, first.RawJSON())
	require.Equal(t, thread, info["thread"])
	require.Equal(t, false, info["stateless"])

	// Turn 2 resends the whole history, as OpenAI clients do.
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.UserMessage("what is my name?"))
	second, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs}, option.WithResponseInto(&httpRes))
	require.NoError(t, err)
	require.Equal(t, thread, httpRes.Header.Get("X-Convlog-Thread"))
	// The second answer sees the first turn: the thread has 3 messages.
	require.Contains(t, second.Choices[0].Message.Content, "This thread has 3 messages: 2 from you, 1 from me")

	th, err := e.c.Get(ctx, "acme", thread, client.Consistent())
	require.NoError(t, err)
	require.Len(t, th.Messages, 4, "only the new message was appended")
	require.Equal(t, "You are helpful.", *th.SystemPrompt)
	require.Equal(t, "demo", th.Agent)
	require.Equal(t, "conv-colt", th.Metadata["conv_key"])
	require.Equal(t, "header", th.Metadata["conv_tier"])
	require.Zero(t, th.RejectedCount)

	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.chats, 2)
	for _, ci := range e.chats {
		require.Equal(t, client.ConvTierHeader, ci.Tier)
		require.Equal(t, "demo", ci.Agent)
		require.Equal(t, "answered", ci.Outcome)
		require.False(t, ci.Stateless)
	}
}

func TestChatOpenAISDKStreams(t *testing.T) {
	// Keep-alives between chunks must not upset the SDK's stream decoder.
	e := newEnv(t, withConfig(func(c *httpapi.Config) { c.Heartbeat = 2 * time.Millisecond }))
	ctx := context.Background()
	cl := e.sdk(option.WithHeader("X-Conversation-Id", "conv-stream"))
	stream := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me something nice about streams")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	chunks, contentChunks := 0, 0
	sawUsage := false
	for stream.Next() {
		c := stream.Current()
		require.True(t, acc.AddChunk(c))
		if chunks == 0 {
			require.Equal(t, "assistant", c.Choices[0].Delta.Role, "the role comes first")
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			contentChunks++
		}
		if c.Usage.TotalTokens > 0 {
			sawUsage = true
		}
		chunks++
	}
	require.NoError(t, stream.Err())
	require.Greater(t, contentChunks, 3, "the answer streams in pieces")
	require.True(t, sawUsage)
	require.Equal(t, "stop", acc.Choices[0].FinishReason)
	got := acc.Choices[0].Message.Content
	require.Contains(t, got, `You said: "tell me something nice about streams"`)

	key, err := client.ResolveConvKey(client.ConvRequest{Agent: "demo", Header: http.Header{"X-Conversation-Id": {"conv-stream"}}}, client.ConvKeyOptions{})
	require.NoError(t, err)
	th := e.waitAnswered("acme", key.ThreadID())
	require.Equal(t, th.Messages[len(th.Messages)-1].Content.String(), got, "the stream carries exactly the stored answer")
}

// Tool calls convlog's agent runs itself are not the client's to run: a
// streamed answer carries them only in the extension member
// delta.convlog_tool_calls, so the OpenAI SDK's accumulated message holds
// no tool call (in delta.tool_calls, the SDK's message would ask the
// client to run the clock tool again).
func TestChatOpenAISDKStreamsServerRunToolCallsOnlyInTheExtension(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cl := e.sdk(option.WithHeader("X-Conversation-Id", "conv-tools"))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what time is it?")}
	stream := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs})
	var acc openai.ChatCompletionAccumulator
	var toolChunks []openai.ChatCompletionChunkChoiceDeltaToolCall
	type extCall struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var extChunks []extCall
	for stream.Next() {
		c := stream.Current()
		require.True(t, acc.AddChunk(c))
		if len(c.Choices) > 0 {
			toolChunks = append(toolChunks, c.Choices[0].Delta.ToolCalls...)
			var d struct {
				Ext []extCall `json:"convlog_tool_calls"`
			}
			require.NoError(t, json.Unmarshal([]byte(c.Choices[0].Delta.RawJSON()), &d))
			extChunks = append(extChunks, d.Ext...)
		}
	}
	require.NoError(t, stream.Err())
	require.Empty(t, toolChunks, "no delta.tool_calls: the client has nothing to run")
	require.NotEmpty(t, extChunks, "the server-run call streams in delta.convlog_tool_calls")
	require.Equal(t, 0, extChunks[0].Index)
	require.NotEmpty(t, extChunks[0].ID)
	require.Equal(t, "function", extChunks[0].Type)
	require.Equal(t, model0Clock, extChunks[0].Function.Name)
	msg := acc.Choices[0].Message
	require.Empty(t, msg.ToolCalls, "the SDK's accumulated message asks the client to run nothing")
	require.Contains(t, msg.Content, "2026-01-02T03:04:05Z", "the final answer uses the tool's result")
	require.Equal(t, "stop", acc.Choices[0].FinishReason)

	// The client resends the accumulated message: the history still
	// matches the thread.
	msgs = append(msgs, msg.ToParam(), openai.UserMessage("thanks"))
	next, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs})
	require.NoError(t, err)
	require.Contains(t, next.Choices[0].Message.Content, `You said: "thanks"`)
	require.Empty(t, next.Choices[0].Message.ToolCalls, "non-streamed answers carry no tool calls for the client to run")

	// Non-streamed, the tool calls the agent ran are in the convlog member.
	third, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages: append(msgs, next.Choices[0].Message.ToParam(), openai.UserMessage("what time is it now?"))})
	require.NoError(t, err)
	require.Contains(t, third.Choices[0].Message.Content, "2026-01-02T03:04:05Z")
	calls := convlogOf(t, third.RawJSON())["tool_calls"].([]any)
	require.Len(t, calls, 1)
	require.Equal(t, model0Clock, calls[0].(map[string]any)["name"])
	require.Equal(t, "2026-01-02T03:04:05Z", calls[0].(map[string]any)["result"])
}

const model0Clock = "clock"

func TestChatConversationKeyTiersAndScopes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ask := func(cl openai.Client, p openai.ChatCompletionNewParams) (*openai.ChatCompletion, http.Header) {
		t.Helper()
		var res *http.Response
		c, err := cl.Chat.Completions.New(ctx, p, option.WithResponseInto(&res))
		require.NoError(t, err)
		return c, res.Header
	}
	sys, u1 := openai.SystemMessage("be brief"), openai.UserMessage("hello there")

	t.Run("tier 3 puts a resent history in the same thread", func(t *testing.T) {
		cl := e.sdk()
		c1, h1 := ask(cl, openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{sys, u1}})
		require.Equal(t, "content_hash", h1.Get("X-Convlog-Conversation-Tier"))
		require.Equal(t, client.ContentHashKey("be brief", "hello there"), h1.Get("X-Conversation-Id"))
		c2, h2 := ask(cl, openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{
			sys, u1, c1.Choices[0].Message.ToParam(), openai.UserMessage("and again")}})
		require.Equal(t, h1.Get("X-Convlog-Thread"), h2.Get("X-Convlog-Thread"))
		require.Contains(t, c2.Choices[0].Message.Content, "This thread has 3 messages")
	})
	t.Run("tier 2 reads metadata.conversation_id", func(t *testing.T) {
		cl := e.sdk()
		_, h := ask(cl, openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{u1},
			Metadata: shared.Metadata{"conversation_id": "meta-1"}})
		require.Equal(t, "body", h.Get("X-Convlog-Conversation-Tier"))
		require.Equal(t, "meta-1", h.Get("X-Conversation-Id"))
	})
	t.Run("two users with the same conversation id never share a thread", func(t *testing.T) {
		a, ha := ask(e.sdk(option.WithHeader("X-Conversation-Id", "shared"), option.WithHeader("X-User-Id", "alice")),
			openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{u1}})
		b, hb := ask(e.sdk(option.WithHeader("X-Conversation-Id", "shared")),
			openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{u1}, User: openai.String("bob")})
		require.NotEqual(t, ha.Get("X-Convlog-Thread"), hb.Get("X-Convlog-Thread"))
		require.Contains(t, a.Choices[0].Message.Content, "This thread has 1 message")
		require.Contains(t, b.Choices[0].Message.Content, "This thread has 1 message")
		th, err := e.c.Get(ctx, "acme", hb.Get("X-Convlog-Thread"), client.Consistent())
		require.NoError(t, err)
		require.Equal(t, "bob", th.Owner)
	})
	t.Run("a retried request replays the stored answer", func(t *testing.T) {
		cl := e.sdk(option.WithHeader("X-Conversation-Id", "retry"))
		p := openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{u1}}
		c1, h := ask(cl, p)
		before := e.streamMsgs()
		c2, _ := ask(cl, p)
		require.Equal(t, c1.Choices[0].Message.Content, c2.Choices[0].Message.Content)
		require.Equal(t, before, e.streamMsgs(), "nothing was appended")
		require.Equal(t, true, convlogOf(t, c2.RawJSON())["replayed"])
		th, err := e.c.Get(ctx, "acme", h.Get("X-Convlog-Thread"), client.Consistent())
		require.NoError(t, err)
		require.Len(t, th.Messages, 2)
	})
}

func TestChatEphemeralWithoutHashFallback(t *testing.T) {
	e := newEnv(t, withConfig(func(c *httpapi.Config) { c.DisableConvHashFallback = true }))
	cl := e.sdk()
	p := openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one shot")}}
	var threads []string
	for range 2 {
		var res *http.Response
		c, err := cl.Chat.Completions.New(context.Background(), p, option.WithResponseInto(&res))
		require.NoError(t, err)
		require.Equal(t, "ephemeral", res.Header.Get("X-Convlog-Conversation-Tier"))
		require.Equal(t, "true", res.Header.Get("X-Convlog-Stateless"))
		require.Equal(t, true, convlogOf(t, c.RawJSON())["stateless"])
		threads = append(threads, res.Header.Get("X-Convlog-Thread"))
	}
	require.NotEqual(t, threads[0], threads[1], "identical requests stay apart")
	for _, id := range threads {
		th, err := e.c.Get(context.Background(), "acme", id, client.Consistent())
		require.NoError(t, err, "an ephemeral conversation is recorded too")
		require.Equal(t, "true", th.Metadata["stateless"])
	}
}

// The Agenticore seed's curl example: turn 2 sends only the new message.
func TestChatAgenticoreCurlSendsOnlyTheNewMessage(t *testing.T) {
	e := newEnv(t)
	turn := func(text string) map[string]any {
		r := e.do("POST", "/v1/chat/completions", keyAcme,
			map[string]any{"model": "demo", "messages": []map[string]any{{"role": "user", "content": text}}},
			"X-Conversation-Id", "curl-conv")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var c map[string]any
		r.json(t, &c)
		return c
	}
	turn("my name is colt")
	second := turn("what is my name?")
	content := second["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	require.Contains(t, content, "This thread has 3 messages: 2 from you, 1 from me")
}

func TestChatDivergedHistoryIsRejected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	requests := 0
	counting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		requests++
		return e.srv.Client().Transport.RoundTrip(r)
	})}
	cl := e.sdk(option.WithHeader("X-Conversation-Id", "diverge"), option.WithHTTPClient(counting))
	first, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("original question")}})
	require.NoError(t, err)
	before := e.streamMsgs()
	requests = 0
	_, err = cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("an edited question"),
			first.Choices[0].Message.ToParam(), openai.UserMessage("next")}})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusConflict, apiErr.StatusCode)
	require.Equal(t, "history-diverged", apiErr.Code)
	require.Equal(t, "messages[0]", apiErr.Param)
	require.Contains(t, apiErr.Message, "fork")
	require.Equal(t, 1, requests, "the SDK does not retry a divergence")
	require.Equal(t, before, e.streamMsgs(), "nothing was appended")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestChatModelsList(t *testing.T) {
	e := newEnv(t)
	cl := e.sdk()
	page, err := cl.Models.List(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, "demo", page.Data[0].ID)
	m, err := cl.Models.Get(context.Background(), "demo")
	require.NoError(t, err)
	assert.Equal(t, "demo", m.ID)
	_, err = cl.Models.Get(context.Background(), "nope")
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
}

func TestChatStreamedAnswerMatchesStoredTurn(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/chat/completions", keyAcme, map[string]any{"model": "demo", "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "what time is it?"}}}, "X-Conversation-Id", "raw-stream")
	require.Equal(t, http.StatusOK, r.status)
	require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream"))
	require.Equal(t, "no", r.header.Get("X-Accel-Buffering"))
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n\n")
	require.Equal(t, "data: [DONE]", lines[len(lines)-1])
	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(lines[len(lines)-2], "data: ")), &last))
	require.Equal(t, "stop", last["choices"].([]any)[0].(map[string]any)["finish_reason"])
	require.Equal(t, "chat.completion.chunk", last["object"])
	th := e.waitAnswered("acme", r.header.Get("X-Convlog-Thread"))
	require.Equal(t, events.RoleUser, th.Messages[0].Role)
	require.Len(t, th.Messages, 4, "user, tool call, tool result, answer")
}

// Inngest AgentKit 0.13 sends [system, current user message, ...history]
// with the conversation key in metadata (its openai() helper cannot add
// headers): turn 2 in that order continues the thread (it was refused with
// 409 history-diverged before). Driven with the real openai-go SDK.
func TestChatCurrentFirstOrderContinuesTheThread(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cl := e.sdk()
	meta := shared.Metadata{"conversation_id": "agentkit-run-1"}
	first, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Metadata: meta,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are helpful."), openai.UserMessage("my name is colt")}})
	require.NoError(t, err)
	second, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Metadata: meta,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are helpful."),
			openai.UserMessage("what is my name?"), openai.UserMessage("my name is colt"), first.Choices[0].Message.ToParam()}})
	require.NoError(t, err)
	require.Contains(t, second.Choices[0].Message.Content, "This thread has 3 messages")
	require.Equal(t, convlogOf(t, first.RawJSON())["thread"], convlogOf(t, second.RawJSON())["thread"])
}

// A client's own tools pass through as in the OpenAI API: the agent calls
// one (the offline agent does for "use NAME"), the answer ends with
// finish_reason "tool_calls" and the call in message.tool_calls, streamed
// (delta.tool_calls) and not; the client runs it and sends the result in
// its next request, convlog stores call and result paired, and the agent
// answers from the result. Driven with the real openai-go SDK.
func TestChatClientToolsRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	weather := openai.ChatCompletionToolParam{Function: shared.FunctionDefinitionParam{Name: "get_weather",
		Description: openai.String("the weather in a city"), Parameters: shared.FunctionParameters{"type": "object"}}}
	for _, streamed := range []bool{false, true} {
		conv := fmt.Sprintf("conv-client-tools-%v", streamed)
		cl := e.sdk(option.WithHeader("X-Conversation-Id", conv))
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("use get_weather")}
		params := openai.ChatCompletionNewParams{Model: "demo", Messages: msgs, Tools: []openai.ChatCompletionToolParam{weather}}
		var msg openai.ChatCompletionMessage
		var finish string
		if streamed {
			stream := cl.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				require.True(t, acc.AddChunk(stream.Current()))
			}
			require.NoError(t, stream.Err())
			msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			res, err := cl.Chat.Completions.New(ctx, params)
			require.NoError(t, err)
			msg, finish = res.Choices[0].Message, res.Choices[0].FinishReason
		}
		require.Equal(t, "tool_calls", finish, "streamed=%v", streamed)
		require.Len(t, msg.ToolCalls, 1)
		call := msg.ToolCalls[0]
		require.Equal(t, "get_weather", call.Function.Name)
		require.NotEmpty(t, call.ID)

		// The client runs its tool and sends the result.
		msgs = append(msgs, msg.ToParam(), openai.ToolMessage("sunny, 21 C", call.ID))
		next, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs,
			Tools: []openai.ChatCompletionToolParam{weather}})
		require.NoError(t, err)
		require.Equal(t, "stop", next.Choices[0].FinishReason)
		require.Contains(t, next.Choices[0].Message.Content, "sunny, 21 C", "the agent answers from the client's result")
		require.Empty(t, next.Choices[0].Message.ToolCalls)

		key, err := client.ResolveConvKey(client.ConvRequest{Agent: "demo", Header: http.Header{"X-Conversation-Id": {conv}}}, client.ConvKeyOptions{})
		require.NoError(t, err)
		th, err := e.c.Get(ctx, "acme", key.ThreadID(), client.Consistent())
		require.NoError(t, err)
		require.Empty(t, th.Pending, "the call is answered")
		var roles []string
		for _, m := range th.Messages {
			roles = append(roles, string(m.Role))
			if m.Role == events.RoleTool {
				require.Equal(t, call.ID, m.ToolCallID, "the result is paired with the call")
			}
		}
		require.Equal(t, []string{"user", "assistant", "tool", "assistant"}, roles)
	}
}

// streamedCall is a tool-call piece of a streamed chunk's delta.
type streamedCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// streamedToolCalls parses a raw SSE chat stream into the pieces of
// delta.tool_calls and delta.convlog_tool_calls, in order, and the finish
// reason.
func streamedToolCalls(t *testing.T, body []byte) (client, server []streamedCall, finish string) {
	t.Helper()
	for _, ev := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls        []streamedCall `json:"tool_calls"`
					ConvlogToolCalls []streamedCall `json:"convlog_tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), "%s", data)
		for _, ch := range c.Choices {
			client = append(client, ch.Delta.ToolCalls...)
			server = append(server, ch.Delta.ConvlogToolCalls...)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return client, server, finish
}

// A turn whose step calls a tool the agent runs (clock) and a client tool
// (get_weather), in either order: each member of the streamed delta
// numbers its own calls from 0, as the OpenAI SDKs' accumulators need
// (they index an array by it), the non-streamed message lists the
// client's call only, the stored assistant message keeps both calls, in
// the model's order, with the ids the client saw, and the client's view of
// the step with its result continues the thread.
func TestChatMixedTurnNumbersClientCallsFromZero(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
	for _, tc := range []struct {
		name, prompt string
		clockFirst   bool
	}{
		{"the agent's call comes first", "what time is it? use get_weather", true},
		{"the client's call comes first", "use get_weather. what time is it?", false},
	} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, streamed=%v", tc.name, streamed), func(t *testing.T) {
				conv := fmt.Sprintf("conv-mixed-%v-%v", tc.clockFirst, streamed)
				user := map[string]any{"role": "user", "content": tc.prompt}
				r := e.do("POST", "/v1/chat/completions", keyAcme, map[string]any{"model": "demo", "stream": streamed,
					"messages": []map[string]any{user}, "tools": tools}, "X-Conversation-Id", conv)
				require.Equal(t, http.StatusOK, r.status, "%s", r.body)
				var weatherID, clockID string
				if streamed {
					weatherID, clockID = mixedStreamedIDs(t, r.body)
				} else {
					weatherID, clockID = mixedCompletionIDs(t, r)
				}
				th, err := e.c.Get(ctx, "acme", r.header.Get("X-Convlog-Thread"), client.Consistent())
				require.NoError(t, err)
				require.Equal(t, events.RoleAssistant, th.Messages[1].Role)
				stored := th.Messages[1].ToolCalls
				require.Len(t, stored, 2, "the stored step keeps both calls")
				names, ids := []string{model0Clock, "get_weather"}, []string{clockID, weatherID}
				if !tc.clockFirst {
					names, ids = []string{"get_weather", model0Clock}, []string{weatherID, clockID}
				}
				assert.Equal(t, names, []string{stored[0].Name, stored[1].Name})
				assert.Equal(t, ids, []string{stored[0].ID, stored[1].ID})

				next := e.do("POST", "/v1/chat/completions", keyAcme, map[string]any{"model": "demo", "tools": tools,
					"messages": []map[string]any{user,
						{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": weatherID, "type": "function",
							"function": map[string]any{"name": "get_weather", "arguments": "{}"}}}},
						{"role": "tool", "tool_call_id": weatherID, "content": "sunny, 21 C"}}},
					"X-Conversation-Id", conv)
				require.Equal(t, http.StatusOK, next.status, "%s", next.body)
				require.Contains(t, string(next.body), "sunny, 21 C")
				require.Equal(t, r.header.Get("X-Convlog-Thread"), next.header.Get("X-Convlog-Thread"))
			})
		}
	}
}

// mixedStreamedIDs checks the tool calls of a streamed mixed turn and
// returns the ids of the client's call and of the agent's.
func mixedStreamedIDs(t *testing.T, body []byte) (weatherID, clockID string) {
	t.Helper()
	calls, ext, finish := streamedToolCalls(t, body)
	require.Equal(t, "tool_calls", finish)
	require.NotEmpty(t, calls)
	require.NotEmpty(t, ext)
	for _, c := range calls {
		require.Equal(t, 0, c.Index, "delta.tool_calls counts only the client's calls, from 0")
	}
	for _, c := range ext {
		require.Equal(t, 0, c.Index, "delta.convlog_tool_calls counts only the agent's calls, from 0")
	}
	require.Equal(t, "get_weather", calls[0].Function.Name)
	require.Equal(t, model0Clock, ext[0].Function.Name)
	return calls[0].ID, ext[0].ID
}

// mixedCompletionIDs checks the tool calls of a non-streamed mixed turn
// and returns the ids of the client's call and of the agent's.
func mixedCompletionIDs(t *testing.T, r resp) (weatherID, clockID string) {
	t.Helper()
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				ToolCalls []streamedCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	r.json(t, &c)
	require.Equal(t, "tool_calls", c.Choices[0].FinishReason)
	require.Len(t, c.Choices[0].Message.ToolCalls, 1, "the message lists the client's call only")
	require.Equal(t, "get_weather", c.Choices[0].Message.ToolCalls[0].Function.Name)
	ran := convlogOf(t, string(r.body))["tool_calls"].([]any)
	require.Len(t, ran, 1)
	require.Equal(t, model0Clock, ran[0].(map[string]any)["name"])
	return c.Choices[0].Message.ToolCalls[0].ID, ran[0].(map[string]any)["id"].(string)
}
