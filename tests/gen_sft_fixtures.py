#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/sft/: prompt/answer data as TRL 1.16's SFTTrainer prepares it, and
the completion-only loss and gradients transformers computes on it with gradient
accumulation, for tests/test_sft.c.

Not run by CI (it needs PyTorch, transformers, trl, tokenizers); run once and commit the
output. No downloads: two tiny byte-level BPE tokenizers trained here with `tokenizers`, a
random tiny Llama (fixed seeds), single-threaded, eager attention.

    /tmp/venv-torch/bin/python tests/gen_sft_fixtures.py [--out tests/fixtures/sft]

Tokenizers (tokenizer.json + tokenizer_config.json with the model's chat template as a
string, as the Hub ships them):
  chatml   SmolLM2-style: <|im_start|>/<|im_end|>, eos <|im_end|>, SmolLM2's template (a
           default system message when the first message is not a system one)
  llama3   Llama 3-style: a TemplateProcessing post-processor that puts <|begin_of_text|>
           first (so tokenizer(text) adds it, as Llama 3's does), eos <|eot_id|>, Meta
           Llama 3's template (headers, content | trim, <|eot_id|>)
records.jsonl: 2 {"text"}, 2 {"prompt", "completion"}, 2 {"messages"} records.

Later templates, the text the model repositories publish (TRL ships each verbatim in
trl/chat_templates/ and compares a tokenizer's template with them for identity; its CI checks
them against the Hub), with tokenizers of their special tokens:
  qwen2_5   Qwen2.5-*-Instruct's (qwen2_5.jinja): ChatML, Qwen's default system message
  qwen3     Qwen3's (qwen3.jinja, Qwen3-0.6B ... 32B): <think> blocks; <think> and </think>
            added tokens (not special), as Qwen3's tokenizer has them
  llama3_1  Llama 3.1's (llama3_1.jinja): a system block dated "Cutting Knowledge Date:
            December 2023" / "Today Date: 26 Jul 2024" (date_string's default)
  llama3_2  Llama 3.2's (llama3_2.jinja): the same, dated strftime_now("%d %b %Y") (today);
            here date_string "03 Feb 2025" through chat_template_kwargs
chat_records.jsonl: conversations for them (no system message, system first, in the middle,
several turns, white space a trim removes, Unicode white space, think tags in content);
qwen3_records.jsonl: reasoning_content, and think tags Qwen3 splits. gemma_records.jsonl:
Gemma's (and Gemma 3's) alternating turns; gemma3_records.jsonl: Gemma 3's first system
message; gemma3_parts_records.jsonl: Gemma 3's contents as lists of text parts;
phi3_records.jsonl: for phi3 and phi3_5 (Phi-3's and Phi-3.5's templates, phi3.jinja and
phi3_5.jinja: <|ROLE|>, <|end|>, eos_token at the end), an empty system message and a
conversation ending with a user message; qwen3_2507 (Qwen3-*-Instruct-2507's,
qwen3_instruct_2507.jinja: ChatML, no default system message, no think handling) on the chat
records; deepseek_r1 (DeepSeek-R1-Distill's, deepseek_r1_distill.jinja: bos, the last system
message's content, <|User|>/<|Assistant|> with fullwidth bars; a bos post-processor, <think>
added tokens) on the chat records and r1_records.jsonl (two system messages, reasoning in two
assistant turns: TRL's training template keeps it, the published one drops it from earlier
turns of a prompt); gpt_oss (gpt-oss's harmony template, gptoss.jinja: a system block dated
by strftime_now, here transformers' clock pinned to 2025-02-03 (GPTOSS_DATE), a first system
or developer message as instructions, <|start|>ROLE<|message|>...<|end|>, the last assistant
message's thinking on the analysis channel and its answer closed by <|return|>; a tokenizer
of harmony's special tokens, eos <|return|>, pad <|endoftext|>, no bos added) on the chat
records, gptoss_records.jsonl (developer or system first, thinking in the last and earlier
turns, reasoning_content as thinking, an assistant message not last, a conversation ending
with a user message) and gptoss_kwargs_records.jsonl (chat_template_kwargs reasoning_effort
and model_identity, a record a dataset: the records of a dataset share their keys).
NAME.prompts: each
conversation up to its last user message through apply_chat_template with
add_generation_prompt=True (the published template; nnt_sft_encode_prompt). NAME.expected as above,
SFTTrainer with assistant_only_loss: Qwen2.5, Qwen3, Qwen3-Instruct-2507, DeepSeek-R1 and
gpt-oss through TRL's own training templates (qwen2_5_training.jinja, qwen3_training.jinja,
qwen3_instruct_2507_training.jinja, deepseek_r1_distill_training.jinja,
gptoss_training.jinja, which TRL swaps in by identity), Llama 3.1 and
3.2 through a training variant made here (TRL 1.16 has none for them and refuses
assistant_only_loss): the original with llama3_training.jinja's markers (the trimmed content
and <|eot_id|> of an assistant turn), checked to render the original's ids. Qwen3's training
template renders a <think> block in every assistant turn, the original only after the last
user message: the records where they differ are listed (nnt follows TRL's training ids).
qwen3_nothink.prompts: Qwen3's prompts with enable_thinking=False (an empty think block after
the generation prompt).
NAME.expected: per record "ids ..." and "labels ..." lines: SFTTrainer's input_ids and
labels (-100: not a target) for that tokenizer; prompt/completion with the default
completion_only_loss, messages with assistant_only_loss=True and a training variant of the
template with {% generation %} markers (chat_template_path): TRL's own llama3_training.jinja
for Llama 3; for ChatML the assistant part of TRL's Qwen2.5 training template ('\\n' +
content + '<|im_end|>\\n' inside the markers) on SmolLM2's template. The training variants
render the same ids as the originals (checked here).

SET_pc.jsonl: the conversations of SET_records.jsonl split at their last user message, as
TRL's conversational prompt/completion ({"prompt": [...], "completion": [...]}; those that end
with a user message left out); NAME.pc_expected: SFTTrainer's ids and labels for them with its
defaults (completion_only_loss, the tokenizer's published template); qwen3_nothink_pc.jsonl and
.pc_expected: Qwen3's with chat_template_kwargs {"enable_thinking": false} in each record;
gptoss_kwargs_pc.jsonl: gpt-oss's records with chat_template_kwargs, theirs kept (at the end
of gpt_oss.pc_expected).
NAME.all_expected (llama3,
qwen3, deepseek_r1, gpt_oss): with completion_only_loss=False, every token counted (see
all_fixtures).

model/ (config.json, model.safetensors): LlamaForCausalLM, V = the llama3 tokenizer's
vocabulary, C 32, L 2, NH 4, NKV 2, hidden 48, untied.
step.safetensors: the six llama3 examples, each padded to T = 64 with <|end_of_text|>
(labels -100), as rows of B 2, in micro-batches of 2 rows (accum 3: text, prompt/completion,
messages, whose counted targets differ). rows, labels (6, T) int32; then what transformers
computes as its Trainer does with num_items_in_batch (model(..., labels,
num_items_in_batch=N), N the step's counted targets, each micro-batch's loss backpropagated,
no division by the accumulation): loss1 (1) the step's loss (the sum of the micro-batch
losses), grad.<HF name> of every parameter after step 1's accumulation, loss2 (1) the loss
of the same step after one torch.optim.SGD(lr 0.5) update; mean_of_means (1): the mean of the
micro-batches' own means (the rule that would be wrong), to show it differs.
"""
import argparse
import datetime
import hashlib
import json
import os
import tempfile

import torch
from datasets import Dataset
from safetensors.torch import save_file
from tokenizers import (AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors,
                        trainers)
import transformers.utils.chat_template_utils
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import SFTConfig, SFTTrainer

T, B, ACCUM, LR = 64, 2, 3, 0.5

CORPUS = [
    "The cat sat on the mat. Rivers run to the sea, and the sea is never full.",
    "Question: what colour is the sky? Answer: The sky is blue.",
    "Translate to French: good morning. bonjour. Hello, who are you? I am a small model.",
    "Be brief. Name a fruit. An apple. Another? A pear. system user assistant",
    "Numbers 1 2 3 and words, punctuation! Yes? No: maybe; quotes \"here\".",
] * 20
CHAT_CORPUS = CORPUS + [
    "Answer in French. Say hello. Bonjour ! What is 2 and 2? Two and two. Four. Hi Hello!",
    "Be formal now. Bye Goodbye. Why? Because. Think about it. Sum? More? No more.",
] * 20

RECORDS = [
    {"text": "The cat sat on the mat."},
    {"text": "Rivers run to the sea, and the sea is never full."},
    {"prompt": "Question: what colour is the sky?\nAnswer:", "completion": " The sky is blue."},
    {"prompt": "Translate to French: good morning", "completion": " bonjour"},
    {"messages": [{"role": "user", "content": "Hello, who are you?"},
                  {"role": "assistant", "content": "I am a small model."}]},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."},
                  {"role": "user", "content": "Another?"},
                  {"role": "assistant", "content": " A pear. "}]},
]

SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\\n" + SMOL_SYSTEM + "<|im_end|>\\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
          "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
CHATML_TRAINING = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOL_SYSTEM + "<|im_end|>\\n' }}{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant' }}{% generation %}"
    "{{ '\\n' + message['content'] + '<|im_end|>\\n' }}{% endgeneration %}{% else %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}")
# Meta Llama 3 Instruct's template (TRL ships it as chat_templates/llama3.jinja)
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] "
          "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content "
          "%}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
          "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

CHAT_RECORDS = [
    {"messages": [{"role": "user", "content": "Hello, who are you?"},
                  {"role": "assistant", "content": "I am a small model."}]},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."},
                  {"role": "user", "content": "Another?"},
                  {"role": "assistant", "content": " A pear. "}]},
    {"messages": [{"role": "system", "content": "  Answer in French.\n"},
                  {"role": "user", "content": " Say hello. "},
                  {"role": "assistant", "content": "\u00a0Bonjour !\u3000\n"}]},
    {"messages": [{"role": "user", "content": "What is 2 and 2?"},
                  {"role": "assistant", "content": "<think>\nTwo and two.\n</think>\n\nFour."}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!"},
                  {"role": "system", "content": "Be formal now."},
                  {"role": "user", "content": "Bye"},
                  {"role": "assistant", "content": "Goodbye."}]},
]
QWEN3_RECORDS = [
    {"messages": [{"role": "user", "content": "Why?"},
                  {"role": "assistant", "content": "Because.",
                   "reasoning_content": "\nThink about it.\n"}]},
    {"messages": [{"role": "user", "content": "Sum?"},
                  {"role": "assistant", "content": "a<think>b\n</think>c</think>\nd"},
                  {"role": "user", "content": "More?"},
                  {"role": "assistant", "content": "\n\nNo more."}]},
]
# Gemma's template (Gemma and Gemma 2) refuses a first system message and both want users on
# the even turns: conversations for both, then Gemma 3's with a first system message
GEMMA_RECORDS = [
    {"messages": [{"role": "user", "content": "Hello, who are you?"},
                  {"role": "assistant", "content": "I am a small model."}]},
    {"messages": [{"role": "user", "content": " Say hello. "},
                  {"role": "assistant", "content": "\u00a0Bonjour !\u3000\n"},
                  {"role": "user", "content": "Another?"},
                  {"role": "assistant", "content": " A pear. "}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "system", "content": "Be formal now."},
                  {"role": "user", "content": "Bye"},
                  {"role": "assistant", "content": "Goodbye."}]},
]
GEMMA3_RECORDS = [
    {"messages": [{"role": "system", "content": "  Answer in French.\n"},
                  {"role": "user", "content": " Say hello. "},
                  {"role": "assistant", "content": "Bonjour !"}]},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."},
                  {"role": "user", "content": "Another?"},
                  {"role": "assistant", "content": "A pear."}]},
]
# Gemma 3's contents as lists of parts (its template renders each text part trimmed, and a
# system message's first part untrimmed); every content a list (one Arrow type for TRL)
GEMMA3_PARTS_RECORDS = [
    {"messages": [{"role": "system", "content": [{"type": "text",
                                                 "text": "  Answer in French.\n"}]},
                  {"role": "user", "content": [{"type": "text", "text": " Say "},
                                               {"type": "text", "text": "hello. "}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "Bon"},
                                                    {"type": "text", "text": " jour !\n"}]}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Name a fruit."}]},
                  {"role": "assistant", "content": [{"type": "text", "text": " "},
                                                    {"type": "text", "text": "An apple."}]},
                  {"role": "user", "content": [{"type": "text", "text": "Another?"},
                                               {"type": "text", "text": "\tOne more."}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "A pear."}]}]},
]
# Phi-3's and Phi-3.5's templates: an empty system message (Phi-3.5 drops it), a conversation
# that ends with a user message after the last assistant one (its eos is not counted)
PHI3_RECORDS = [
    {"messages": [{"role": "system", "content": ""},
                  {"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": " Hello! "},
                  {"role": "user", "content": "Bye"}]},
]
# DeepSeek-R1-Distill's template: the last system message's content right after bos, no
# other system text; an earlier assistant turn's reasoning dropped in a prompt (the published
# template keeps what follows the last </think>), kept whole in training (TRL's
# deepseek_r1_distill_training.jinja)
R1_RECORDS = [
    {"messages": [{"role": "system", "content": "First."},
                  {"role": "user", "content": "Sum?"},
                  {"role": "assistant", "content": "<think>\nadd them\n</think>\n\nThree."},
                  {"role": "system", "content": " Be brief.\n"},
                  {"role": "user", "content": "More?"},
                  {"role": "assistant", "content": "a</think>b</think> Four."}]},
]
# gpt-oss's harmony template (gptoss.jinja): a system block (model identity, knowledge cutoff,
# strftime_now's date, reasoning effort, channels), a first system or developer message as the
# developer block's instructions (left out when empty), other system and developer messages
# dropped, the thinking of the last assistant message alone rendered (its analysis channel),
# earlier turns' final answers closed by <|end|>, the last one by <|return|>; transformers
# takes reasoning_content as thinking too. Every record of a set gets the union of its keys (None
# where absent, which apply_chat_template drops).
GPTOSS_RECORDS = [
    {"messages": [{"role": "developer", "content": "Be brief."},
                  {"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple.", "thinking": "A fruit: apple."}]},
    {"messages": [{"role": "system", "content": "Answer in French."},
                  {"role": "user", "content": "Say hello."},
                  {"role": "assistant", "content": "Bonjour !", "thinking": "Hello in French."},
                  {"role": "user", "content": "Another?"},
                  {"role": "assistant", "content": " Salut. ", "thinking": "\nAnother one.\n"}]},
    {"messages": [{"role": "system", "content": ""},
                  {"role": "user", "content": "Why?"},
                  {"role": "assistant", "content": "Because.",
                   "reasoning_content": "Think about it."}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!", "thinking": "Greet them."},
                  {"role": "developer", "content": "Be formal now."},
                  {"role": "user", "content": "Bye"},
                  {"role": "assistant", "content": "Goodbye."},
                  {"role": "system", "content": "Be brief."}]},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": " Hello! "},
                  {"role": "user", "content": "Bye"}]},
]
# gpt-oss's chat_template_kwargs, one record a dataset (a set's records share their keys, and
# a kwarg None where absent would be rendered): the reasoning effort, then a model identity
GPTOSS_KWARGS_RECORDS = [
    {"messages": [{"role": "user", "content": "Sum?"},
                  {"role": "assistant", "content": "Three.", "thinking": "Add them."}],
     "chat_template_kwargs": {"reasoning_effort": "high"}},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!"}],
     "chat_template_kwargs": {"reasoning_effort": "low", "model_identity": "You are a model."}},
]
# Tool use (new in 0.4): a record's "tools" (JSON schemas, or a string of their JSON, which TRL
# json.loads), assistant messages with "tool_calls" and "tool" messages; rendered by the
# templates that have tools (Qwen2.5's, Qwen3's, Qwen3-Instruct-2507's: Hermes' <tools> system
# block, <tool_call> and <tool_response>; Llama 3.1's and 3.2's: the tools as tojson(indent=4)
# in the first user message, a call as {"name": ..., "parameters": ...}, a tool's content as
# tojson under an ipython header). Given to SFTTrainer with datasets' Json feature for the
# message lists and the tools, so that each record keeps its own keys (Arrow's structs would
# give every tool call the union of the calls' argument names, None where absent).
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. S\u00e3o Paulo"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"]}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                     "b": {"type": "number"}},
                   "required": ["a", "b"]}}}


def call(name, arguments, wrapped=True):
    return {"type": "function", "function": {"name": name, "arguments": arguments}} \
        if wrapped else {"name": name, "arguments": arguments}


# for every template with tools: one call a turn, the function wrapper, arguments as objects
TOOL_RECORDS = [
    {"messages": [{"role": "user", "content": "Weather in S\u00e3o Paulo?"},
                  {"role": "assistant", "tool_calls": [call("get_weather", {
                      "city": "S\u00e3o Paulo", "unit": "celsius", "days": 2})]},
                  {"role": "tool", "name": "get_weather", "content": "22 C, \"sunny\""},
                  {"role": "assistant", "content": "It is 22 C and sunny."}],
     "tools": [WEATHER]},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": " Add 2.5 and 1e-05. "},
                  {"role": "assistant", "tool_calls": [call("add", {"a": 2.5, "b": 1e-05})]},
                  {"role": "tool", "content": "2.50001"},
                  {"role": "assistant", "content": "2.50001"},
                  {"role": "user", "content": "Thanks"},
                  {"role": "assistant", "content": "You are welcome."}],
     "tools": json.dumps([ADD, WEATHER])},
    {"messages": [{"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello! Ask me anything."}],
     "tools": [ADD]},
]
# Qwen's templates alone (Llama's take one call a turn): two calls in a turn and their two
# responses, content beside the calls, arguments as a string (Qwen3 prints it, Qwen2.5
# quotes it), a call without the function wrapper, a tool response in the middle of a prompt,
# reasoning before a call (Qwen3), an empty list of tools (no tools block)
QWEN_TOOL_RECORDS = [
    {"messages": [{"role": "user", "content": "Add 1 and 2, and the weather in Paris."},
                  {"role": "assistant", "content": "Let me check.",
                   "tool_calls": [call("add", {"a": 1, "b": 2}),
                                  call("get_weather", '{"city": "Paris"}')]},
                  {"role": "tool", "content": "3"},
                  {"role": "tool", "content": "18 C\nrain"},
                  {"role": "assistant", "content": "3, and 18 C with rain in Paris."}],
     "tools": [ADD, WEATHER]},
    {"messages": [{"role": "system", "content": "You add numbers."},
                  {"role": "user", "content": "1 + 1?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [call("add", {"a": 1, "b": 1}, wrapped=False)]},
                  {"role": "tool", "content": "2"},
                  {"role": "assistant", "content": "2."}],
     "tools": [ADD]},
    {"messages": [{"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."}],
     "tools": []},
]
# Qwen3's alone: reasoning before a call, think tags in a content beside calls
QWEN3_TOOL_RECORDS = [
    {"messages": [{"role": "user", "content": "2 + 2?"},
                  {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
                   "tool_calls": [call("add", {"a": 2, "b": 2})]},
                  {"role": "tool", "content": "4"},
                  {"role": "assistant", "content": "<think>\nIt said 4.\n</think>\n\nFour."}],
     "tools": [ADD]},
    {"messages": [{"role": "user", "content": "3 + 3?"},
                  {"role": "assistant", "content": "<think>Add.</think>\n\nCalling.",
                   "tool_calls": [call("add", {"a": 3, "b": 3})]}],
     "tools": [ADD]},
]
# Llama 3.1's and 3.2's alone: a tool's content as an object (tojson), the tools in the system
# block (chat_template_kwargs tools_in_user_message false), ipython as the tool's role, an
# empty list of tools (rendered: "Environment: ipython" and the tools' user turn, no tools)
LLAMA_TOOL_RECORDS = [
    {"messages": [{"role": "user", "content": "Add 2 and 3."},
                  {"role": "assistant", "tool_calls": [call("add", {"a": 2, "b": 3})]},
                  {"role": "ipython", "content": {"result": 5, "note": "exact"}},
                  {"role": "assistant", "content": "5."}],
     "tools": [ADD]},
    {"messages": [{"role": "system", "content": "Use tools."},
                  {"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Oslo"})]},
                  {"role": "tool", "content": "-3 C"},
                  {"role": "assistant", "content": "It is -3 C."}],
     "tools": [WEATHER, ADD], "chat_template_kwargs": {"tools_in_user_message": False}},
    {"messages": [{"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "An apple."}],
     "tools": []},
]
# gpt-oss's alone (harmony: the tools as a TypeScript namespace in the developer message, a
# call on the commentary channel to=functions.NAME, a response from functions.NAME): a schema
# with every kind of parameter its template writes (descriptions, enums, defaults, arrays of
# each kind, nested objects, nullable, no type), a tool without parameters, a call's
# content_type; thinking before a call (dropped when a final answer follows), content as the
# call's analysis, a response as JSON (an object), a conversation ending with a response
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the notes.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "integer", "default": 10},
        "order": {"type": "string", "enum": ["asc", "desc"], "default": "asc"},
        "exact": {"type": "boolean", "default": False},
        "scores": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
        "where": {"type": "object", "properties": {"lang": {"type": "string"},
                                                  "year": {"type": "integer"}},
                  "required": ["lang"]},
        "pages": {"type": "array", "items": {"type": "object", "properties": {
            "from": {"type": "integer"}, "to": {"type": "integer"}}}},
        "note": {"type": "string", "nullable": True},
        "ids": {"type": "array", "items": {"type": "integer"}, "nullable": True},
        "extra": {"description": "Anything else"},
        "mode": {"type": ["string", "number"]},
        "flags": {"type": "array"}},
        "required": ["query"]}}}
NOW = {"type": "function", "function": {"name": "now", "description": "The time now."}}
EMPTY_PARAMS = {"type": "function", "function": {
    "name": "ping", "description": "Ping.", "parameters": {"type": "object", "properties": {}}}}
GPTOSS_TOOL_RECORDS = [
    {"messages": [{"role": "developer", "content": "Be brief."},
                  {"role": "user", "content": "Find notes on rivers."},
                  {"role": "assistant", "thinking": "Search for rivers.",
                   "tool_calls": [call("search", {"query": "rivers", "limit": 3})]},
                  {"role": "tool", "content": "[\"Rivers run to the sea.\"]"},
                  {"role": "assistant", "content": "Rivers run to the sea.",
                   "thinking": "One note."}],
     "tools": [SEARCH, NOW, EMPTY_PARAMS]},
    {"messages": [{"role": "user", "content": "What time is it?"},
                  {"role": "assistant", "content": "Ask the clock.",
                   "tool_calls": [{"type": "function", "function": {
                       "name": "now", "arguments": {}, "content_type": "json"}}]},
                  {"role": "tool", "content": {"time": "12:00"}}],
     "tools": [NOW]},
    {"messages": [{"role": "system", "content": "Use tools."},
                  {"role": "user", "content": "Add 2 and 3, then ping."},
                  {"role": "assistant", "tool_calls": [call("add", {"a": 2, "b": 3})]},
                  {"role": "tool", "content": "5"},
                  {"role": "assistant", "thinking": "Now ping.",
                   "tool_calls": [call("ping", "{}")]},
                  {"role": "tool", "content": "pong"},
                  {"role": "assistant", "content": "5, and pong."}],
     "tools": [ADD, EMPTY_PARAMS]},
    # its built-in tools (chat_template_kwargs builtin_tools): described in the system block
    {"messages": [{"role": "user", "content": "Look it up."},
                  {"role": "assistant", "content": "Done."}],
     "tools": [NOW], "chat_template_kwargs": {"builtin_tools": ["browser", "python"]}},
    {"messages": [{"role": "user", "content": "Compute it."},
                  {"role": "assistant", "content": "42."}],
     "chat_template_kwargs": {"builtin_tools": ["python"]}},
]
TOOL_SETS = {"qwen2_5": ["tool_records", "qwen_tool_records"],
             "qwen3": ["tool_records", "qwen_tool_records", "qwen3_tool_records"],
             "qwen3_2507": ["tool_records", "qwen_tool_records"],
             "llama3_1": ["tool_records", "llama_tool_records"],
             "llama3_2": ["tool_records", "llama_tool_records"],
             "gpt_oss": ["tool_records", "gptoss_tool_records"]}
TOOL_RECORD_SETS = {"tool_records": TOOL_RECORDS, "qwen_tool_records": QWEN_TOOL_RECORDS,
                    "qwen3_tool_records": QWEN3_TOOL_RECORDS,
                    "llama_tool_records": LLAMA_TOOL_RECORDS,
                    "gptoss_tool_records": GPTOSS_TOOL_RECORDS}
LLAMA32_DATE = "03 Feb 2025"
# gpt-oss's "Current date" (strftime_now("%Y-%m-%d"), local time): transformers' clock pinned
# to this day for every fixture (Llama 3.2's is date_string, given)
GPTOSS_DATE = datetime.datetime(2025, 2, 3, 12, 0, 0)


class FixedClock(datetime.datetime):
    """datetime with now() GPTOSS_DATE: transformers' strftime_now reads datetime.now()."""

    @classmethod
    def now(cls, tz=None):
        return GPTOSS_DATE


def trl_template(name):
    d = os.path.join(os.path.dirname(__import__("trl").__file__), "chat_templates")
    with open(os.path.join(d, name + ".jinja"), encoding="utf-8") as f:
        return f.read()


def llama31_training(original):
    """Llama 3.1/3.2's template with llama3_training.jinja's markers around an assistant
    turn's trimmed content and <|eot_id|>."""
    line = ("        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
            "message['content'] | trim + '<|eot_id|>' }}\n")
    assert original.count(line) == 1, "the message line moved"
    marked = ("        {%- if message['role'] == 'assistant' %}\n"
              "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
              "            {%- generation %}\n"
              "            {{- message['content'] | trim + '<|eot_id|>' }}\n"
              "            {%- endgeneration %}\n"
              "        {%- else %}\n    " + line +
              "        {%- endif %}\n")
    return original.replace(line, marked)


QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA31_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"]
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"]
PHI3_SPECIAL = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
PHI3_CONFIG = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "bos_token": None}
# DeepSeek-R1-Distill-Qwen's: bos put first by the post-processor, <think> and </think> added
# tokens (not special), eos also its pad
R1_BOS, R1_EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"
R1_SPECIAL = [R1_BOS, R1_EOS, "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"]
GEMMA_CONFIG = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}
# gpt-oss's (o200k_harmony): the harmony tokens special, eos <|return|>, pad <|endoftext|>, bos
# <|startoftext|> (as openai/gpt-oss-20b's tokenizer_config.json names them), no post-processor
# bos (its template prints none); the system block's text in the corpus, so that it encodes in
# few tokens of a 400-token vocabulary
GPTOSS_SPECIAL = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>",
                  "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>"]
GPTOSS_CORPUS = CHAT_CORPUS + [
    "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
    "Current date: 2025-02-03\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, "
    "final. Channel must be included for every message. system developer # Instructions "
    "assistant analysis final user Reasoning: high low",
] * 40
NEW_TOKENIZERS = {
    "qwen2_5": dict(special=QWEN_SPECIAL, bos=None, template="qwen2_5", training=None,
                    config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                            "bos_token": None}),
    "qwen3": dict(special=QWEN_SPECIAL, added=["<think>", "</think>"], bos=None,
                  template="qwen3", training=None,
                  config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                          "bos_token": None}),
    "llama3_1": dict(special=LLAMA31_SPECIAL, bos="<|begin_of_text|>", template="llama3_1",
                     training=llama31_training,
                     config={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "llama3_2": dict(special=LLAMA31_SPECIAL, bos="<|begin_of_text|>", template="llama3_2",
                     training=llama31_training, date=LLAMA32_DATE,
                     config={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    # new in 0.3: TRL swaps in gemma_training.jinja / gemma3_training.jinja by identity
    "gemma": dict(special=GEMMA_SPECIAL, bos="<bos>", template="gemma", training=None,
                  config=GEMMA_CONFIG, records=["gemma_records"]),
    "gemma3": dict(special=GEMMA_SPECIAL, bos="<bos>", template="gemma3", training=None,
                   config=GEMMA_CONFIG,
                   records=["gemma_records", "gemma3_records", "gemma3_parts_records"]),
    # new in 0.3: TRL swaps in phi3_training.jinja / phi3_5_training.jinja by identity
    "phi3": dict(special=PHI3_SPECIAL, bos=None, template="phi3", training=None,
                 config=PHI3_CONFIG, records=["chat_records", "phi3_records"]),
    "phi3_5": dict(special=PHI3_SPECIAL, bos=None, template="phi3_5", training=None,
                   config=PHI3_CONFIG, records=["chat_records", "phi3_records"]),
    # new in 0.3: Qwen3-*-Instruct-2507's (ChatML without <think> handling), DeepSeek-R1-Distill's
    # (Qwen and Llama distills); TRL swaps in their _training.jinja by identity
    "qwen3_2507": dict(special=QWEN_SPECIAL, added=["<think>", "</think>"], bos=None,
                       template="qwen3_instruct_2507", training=None,
                       config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                               "bos_token": None}),
    "deepseek_r1": dict(special=R1_SPECIAL, added=["<think>", "</think>"], bos=R1_BOS,
                        template="deepseek_r1_distill", training=None,
                        config={"bos_token": R1_BOS, "eos_token": R1_EOS, "pad_token": R1_EOS},
                        records=["chat_records", "r1_records"]),
    # new in 0.3: gpt-oss's harmony template; TRL swaps in gptoss_training.jinja by identity
    "gpt_oss": dict(special=GPTOSS_SPECIAL, bos=None, template="gptoss", training=None,
                    config={"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                            "pad_token": "<|endoftext|>"}, corpus=GPTOSS_CORPUS,
                    records=["chat_records", "gptoss_records", "gptoss_kwargs_records"]),
}
RECORD_SETS = {"chat_records": CHAT_RECORDS, "qwen3_records": QWEN3_RECORDS,
               "gemma_records": GEMMA_RECORDS, "gemma3_records": GEMMA3_RECORDS,
               "gemma3_parts_records": GEMMA3_PARTS_RECORDS, "phi3_records": PHI3_RECORDS,
               "r1_records": R1_RECORDS, "gptoss_records": GPTOSS_RECORDS,
               "gptoss_kwargs_records": GPTOSS_KWARGS_RECORDS}

TOKENIZERS = {
    "chatml": dict(special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                   config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                           "bos_token": "<|im_start|>", "chat_template": CHATML}),
    "llama3": dict(special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                            "<|end_header_id|>", "<|eot_id|>"], bos="<|begin_of_text|>",
                   config={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                           "pad_token": "<|end_of_text|>", "chat_template": LLAMA3}),
}


def train_tokenizer(name, spec, out, corpus=CORPUS):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=spec["special"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if spec.get("added"):
        tok.add_tokens([AddedToken(t, special=False, normalized=False)
                        for t in spec["added"]])
    if spec["bos"]:
        bos = spec["bos"]
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    cfg = dict(spec["config"], tokenizer_class="PreTrainedTokenizerFast", model_max_length=T)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return d


def tiny_llama(vocab, seed):
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      rope_theta=10000.0, attn_implementation="eager", bos_token_id=None,
                      eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).float()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def trl_prepare(tok_dir, records, training_template, model):
    """SFTTrainer's own dataset preparation: (input_ids, labels) per record."""
    tok = AutoTokenizer.from_pretrained(tok_dir)
    out = []
    kinds = [[r for r in records if "text" in r], [r for r in records if "prompt" in r],
             [r for r in records if "messages" in r]]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "training.jinja")
        with open(path, "w") as f:
            f.write(training_template)
        for recs in kinds:
            conv = "messages" in recs[0]
            cfg = SFTConfig(output_dir=tmp, report_to=[], max_length=None, packing=False,
                            assistant_only_loss=conv, use_cpu=True,
                            chat_template_path=path if conv else None)
            tr = SFTTrainer(model=model, args=cfg, train_dataset=Dataset.from_list(recs),
                            processing_class=tok)
            for ex in tr.train_dataset:
                out.append((list(ex["input_ids"]), list(ex["labels"])))
            if conv:   # the training variant renders what the original template does
                for r in recs:
                    orig = tok.apply_chat_template(r["messages"], tokenize=True,
                                                   return_dict=True)["input_ids"]
                    assert list(orig) == out[-len(recs) + recs.index(r)][0], "templates differ"
    return out


def trl_prepare_chat(tok_dir, records, training_template, model, date=None):
    """SFTTrainer's preparation of conversations with assistant_only_loss: TRL's own training
    template (training_template None: TRL picks it by the tokenizer's template), or the one
    given. Also the original template's ids of each record (a fresh tokenizer: SFTTrainer
    replaces the template of the one it is given)."""
    kwargs = {"date_string": date} if date else {}
    rows = [dict(r, chat_template_kwargs=kwargs) for r in records] if date else records
    examples = []
    trl_lines(tok_dir, rows, model, training_template, examples=examples,
              assistant_only_loss=True)
    out = [(list(ex["input_ids"]), list(ex["labels"])) for ex in examples]
    fresh = AutoTokenizer.from_pretrained(tok_dir)
    original = [list(fresh.apply_chat_template(r["messages"], tokenize=True, return_dict=True,
                                               **kwargs, **r.get("chat_template_kwargs", {}))
                     ["input_ids"]) for r in records]
    return out, original


def new_templates(args):
    for set_name, recs in RECORD_SETS.items():
        with open(os.path.join(args.out, set_name + ".jsonl"), "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    for name, spec in NEW_TOKENIZERS.items():
        spec = dict(spec)
        original_template = trl_template(spec["template"])
        spec["config"] = dict(spec["config"], chat_template=original_template)
        d = train_tokenizer(name, spec, args.out, spec.get("corpus", CHAT_CORPUS))
        vocab = Tokenizer.from_file(os.path.join(d, "tokenizer.json")).get_vocab_size()
        training = spec["training"](original_template) if spec["training"] else None
        model = tiny_llama(vocab, 1)
        default_sets = ["chat_records"] + (["qwen3_records"] if name == "qwen3" else [])
        sets = [RECORD_SETS[k] for k in spec.get("records", default_sets)]
        prepared = []
        for recs in one_dataset_each(sets):
            out, original = trl_prepare_chat(d, recs, training, model, spec.get("date"))
            for k, ((ids, _), orig) in enumerate(zip(out, original)):
                if ids != orig:
                    assert name in ("qwen3", "deepseek_r1"), \
                        f"{name}: the training template renders other ids"
                    print(f"{name}: record {k + 1} of its set renders other ids than the "
                          f"original template (reasoning in an assistant turn)")
            prepared += out
        with open(os.path.join(args.out, f"{name}.expected"), "w") as f:
            for ids, labels in prepared:
                f.write("ids " + " ".join(map(str, ids)) + "\n")
                f.write("labels " + " ".join(map(str, labels)) + "\n")
        print(name, "vocab", vocab, "lengths", [len(i) for i, _ in prepared])


def one_dataset_each(sets):
    """The record sets as SFTTrainer is given them: a set a dataset, but a record with
    chat_template_kwargs alone (the records of a dataset share its columns' keys: a kwarg
    another record lacks would be rendered as None)."""
    for recs in sets:
        if any("chat_template_kwargs" in r for r in recs):
            yield from ([r] for r in recs)
        else:
            yield recs


def up_to_last_user(msgs):
    last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    return msgs[:last + 1]


def prompt_fixtures(args):
    """SET_prompts.jsonl: each conversation of SET_records.jsonl up to its last user message;
    NAME.prompts: those of the tokenizer's sets rendered by the published template with
    add_generation_prompt (apply_chat_template's ids): what nnt_sft_encode_prompt must give."""
    sets = {name: ["chat_records"] for name in ("chatml", "llama3", "qwen2_5", "llama3_1",
                                                "llama3_2")}
    sets.update(qwen3=["chat_records", "qwen3_records"], gemma=["gemma_records"],
                gemma3=["gemma_records", "gemma3_records", "gemma3_parts_records"],
                phi3=["chat_records", "phi3_records"], phi3_5=["chat_records", "phi3_records"],
                qwen3_2507=["chat_records"], deepseek_r1=["chat_records", "r1_records"],
                gpt_oss=["chat_records", "gptoss_records"])
    for set_name in RECORD_SETS:
        if any("chat_template_kwargs" in r for r in RECORD_SETS[set_name]):
            continue   # (a prompt is its messages alone)
        with open(os.path.join(args.out, set_name.replace("records", "prompts") + ".jsonl"),
                  "w") as f:
            for r in RECORD_SETS[set_name]:
                f.write(json.dumps({"messages": up_to_last_user(r["messages"])}) + "\n")
    sets["qwen3_nothink"] = ["chat_records", "qwen3_records"]
    for name, set_names in sets.items():
        tok = AutoTokenizer.from_pretrained(os.path.join(args.out, name.replace("_nothink", "")))
        kwargs = {"date_string": LLAMA32_DATE} if name == "llama3_2" else {}
        if name.endswith("_nothink"):   # Qwen3 with enable_thinking=False
            kwargs = {"enable_thinking": False}
        lines = []
        for set_name in set_names:
            for r in RECORD_SETS[set_name]:
                ids = tok.apply_chat_template(up_to_last_user(r["messages"]), tokenize=True,
                                              return_dict=True, add_generation_prompt=True,
                                              **kwargs)["input_ids"]
                lines.append("ids " + " ".join(map(str, ids)) + "\n")
        with open(os.path.join(args.out, f"{name}.prompts"), "w") as f:
            f.writelines(lines)
        print(name, "prompts", len(lines))


def tiny_llama_for(tok_dir):
    """tiny_llama(vocab, 1) for the tokenizer of tok_dir."""
    vocab = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json")).get_vocab_size()
    return tiny_llama(vocab, 1)


def trl_lines(tok_dir, records, model, training_template=None, dataset=Dataset.from_list,
              examples=None, **options):
    """SFTTrainer's input_ids and labels of records ("ids ..." and "labels ..." lines) with
    its defaults and options (SFTConfig fields); training_template its chat_template_path
    (None: TRL's own choice), dataset what makes the Dataset of the records, examples (a
    list) receives the prepared examples."""
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        if training_template:
            path = os.path.join(tmp, "training.jinja")
            with open(path, "w") as f:
                f.write(training_template)
        cfg = SFTConfig(output_dir=tmp, report_to=[], max_length=None, packing=False,
                        use_cpu=True, chat_template_path=path, **options)
        tr = SFTTrainer(model=model, args=cfg, train_dataset=dataset(records),
                        processing_class=AutoTokenizer.from_pretrained(tok_dir))
        for ex in tr.train_dataset:
            if examples is not None:
                examples.append(ex)
            lines.append("ids " + " ".join(map(str, ex["input_ids"])) + "\n")
            lines.append("labels " + " ".join(map(str, ex["labels"])) + "\n")
    return lines


def split_at_last_user(msgs):
    """TRL's conversational prompt/completion form of a conversation: the messages up to its
    last user message, and those after it (None: nothing after it)."""
    last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    return (msgs[:last + 1], msgs[last + 1:]) if last + 1 < len(msgs) else None


def pc_fixtures(args):
    """SET_pc.jsonl: each conversation of SET_records.jsonl that has messages after its last
    user message as {"prompt": [...], "completion": [...]}; NAME.pc_expected: SFTTrainer's
    input_ids and labels for those of the tokenizer's sets, with its defaults
    (completion_only_loss; the tokenizer's own, published template: apply_chat_template of
    the prompt with add_generation_prompt=True, then of prompt + completion, the completion
    counted from where the two first differ)."""
    sets = {name: ["chat_records"] for name in ("chatml", "llama3", "qwen2_5", "llama3_1",
                                                "llama3_2", "qwen3_2507")}
    sets.update(qwen3=["chat_records", "qwen3_records"], gemma=["gemma_records"],
                gemma3=["gemma_records", "gemma3_records", "gemma3_parts_records"],
                phi3=["chat_records", "phi3_records"], phi3_5=["chat_records", "phi3_records"],
                deepseek_r1=["chat_records", "r1_records"],
                gpt_oss=["chat_records", "gptoss_records", "gptoss_kwargs_records"])
    split = {}
    for set_name, recs in RECORD_SETS.items():   # (a record's chat_template_kwargs kept)
        split[set_name] = [dict({"prompt": pc[0], "completion": pc[1]},
                                **{k: v for k, v in r.items() if k == "chat_template_kwargs"})
                           for r, pc in ((r, split_at_last_user(r["messages"])) for r in recs)
                           if pc]
        with open(os.path.join(args.out, set_name.replace("records", "pc") + ".jsonl"),
                  "w") as f:
            for r in split[set_name]:
                f.write(json.dumps(r) + "\n")
    for name, set_names in sets.items():
        d = os.path.join(args.out, name)
        model = tiny_llama_for(d)
        kwargs = {"date_string": LLAMA32_DATE} if name == "llama3_2" else {}
        lines = []
        for set_name in set_names:
            rows = [dict(r, chat_template_kwargs=kwargs) for r in split[set_name]] \
                if kwargs else split[set_name]
            for group in one_dataset_each([rows]):
                lines += trl_lines(d, group, model)
        with open(os.path.join(args.out, f"{name}.pc_expected"), "w") as f:
            f.writelines(lines)
        print(name, "prompt/completion conversations", len(lines) // 2)
    # per-record chat_template_kwargs: Qwen3's conversations as prompt/completion with
    # enable_thinking=False (the prompt's generation prompt ends with an empty think block)
    recs = [dict(r, chat_template_kwargs={"enable_thinking": False})
            for r in split["chat_records"] + split["qwen3_records"]]
    with open(os.path.join(args.out, "qwen3_nothink_pc.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    d = os.path.join(args.out, "qwen3")
    lines = trl_lines(d, recs, tiny_llama_for(d))
    with open(os.path.join(args.out, "qwen3_nothink.pc_expected"), "w") as f:
        f.writelines(lines)
    print("qwen3 prompt/completion with enable_thinking=False", len(lines) // 2)


def json_dataset(records):
    """records as a Dataset whose every column is datasets' Json feature: each record keeps
    its own keys and values (as json.loads gives them), as a JSON Lines file read line by line
    does, not Arrow's union of the records' structs."""
    from datasets import Features, Json
    keys = []
    for r in records:
        keys += [k for k in r if k not in keys]
    return Dataset.from_list(records, features=Features({k: Json() for k in keys}))


def llama31_tool_training(original):
    """llama31_training's variant with the tool-call turn marked too: the call's JSON and
    <|eot_id|> after the assistant header (the builtin_tools branch, which nnt refuses,
    left out)."""
    marked = llama31_training(original)
    start = marked.index("{%- elif 'tool_calls' in message %}")
    end = marked.index('{%- elif message.role == "tool" or message.role == "ipython" %}')
    branch = """{%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {%- generation %}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
        {%- endgeneration %}
    """
    return marked[:start] + branch + marked[end:]


def last_turn(msgs):
    """The index of the last user or tool message: what a prompt ends with."""
    return max(i for i, m in enumerate(msgs) if m["role"] in ("user", "tool", "ipython"))


def user_split(recs):
    """The records as prompt/completion split at their last user message (the completion:
    the calls, the responses and the answers after it)."""
    out = []
    for r in recs:
        pc = split_at_last_user(r["messages"])
        if pc:
            out.append(dict({k: v for k, v in r.items() if k != "messages"},
                            prompt=pc[0], completion=pc[1]))
    return out


def tool_fixtures(args):
    """Tool use. SET.jsonl for TOOL_RECORD_SETS; SET_prompts.jsonl: each conversation up to
    its last user or tool message with its tools (records with chat_template_kwargs left out);
    SET_pc.jsonl: split there as prompt/completion. For each template of TOOL_SETS:
    NAME.tool_expected (SFTTrainer with assistant_only_loss, the training template as in
    NAME.expected; for Llama 3.1 and 3.2 llama31_tool_training), NAME.tool_prompts
    (apply_chat_template(..., tools=..., add_generation_prompt=True)), NAME.tool_pc_expected
    (SFTTrainer's defaults); SET_pcu.jsonl: split at the last user message instead,
    NAME.tool_pc_assistant_expected: those with assistant_only_loss (the training template;
    of the completion its assistant turns count, its tool responses not)."""
    for set_name, recs in TOOL_RECORD_SETS.items():
        with open(os.path.join(args.out, set_name + ".jsonl"), "w") as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(os.path.join(args.out, set_name.replace("records", "prompts") + ".jsonl"),
                  "w") as f:
            for r in recs:
                if "chat_template_kwargs" not in r:
                    f.write(json.dumps(dict(r, messages=r["messages"][:last_turn(r["messages"]) + 1]),
                                       ensure_ascii=False) + "\n")
        with open(os.path.join(args.out, set_name.replace("records", "pcu") + ".jsonl"),
                  "w") as f:
            for r in user_split(recs):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        with open(os.path.join(args.out, set_name.replace("records", "pc") + ".jsonl"),
                  "w") as f:
            for r in recs:
                k = last_turn(r["messages"]) + 1
                if k < len(r["messages"]):
                    pc = {key: v for key, v in r.items() if key != "messages"}
                    f.write(json.dumps(dict(pc, prompt=r["messages"][:k],
                                            completion=r["messages"][k:]),
                                       ensure_ascii=False) + "\n")
    for name, set_names in TOOL_SETS.items():
        d = os.path.join(args.out, name)
        tok = AutoTokenizer.from_pretrained(d)
        model = tiny_llama_for(d)
        date = LLAMA32_DATE if name == "llama3_2" else None
        training = llama31_tool_training(tok.chat_template) if name.startswith("llama") else None
        expected, prompts, pc, pc_assistant = [], [], [], []
        for set_name in set_names:
            recs = [dict(r, chat_template_kwargs=dict(r.get("chat_template_kwargs", {}),
                                                      date_string=date)) if date else r
                    for r in TOOL_RECORD_SETS[set_name]]
            for group in one_dataset_each([recs]):
                expected += tool_trl_lines(d, group, model, training, assistant_only_loss=True)
            for r in TOOL_RECORD_SETS[set_name]:   # (as SET_prompts.jsonl holds them)
                if "chat_template_kwargs" in r:
                    continue
                tools = r.get("tools")
                tools = json.loads(tools) if isinstance(tools, str) else tools
                kw = {"date_string": date} if date else {}
                ids = tok.apply_chat_template(r["messages"][:last_turn(r["messages"]) + 1],
                                              tools=tools, tokenize=True, return_dict=True,
                                              add_generation_prompt=True, **kw)["input_ids"]
                prompts.append("ids " + " ".join(map(str, ids)) + "\n")
            split = []
            for r in recs:
                k = last_turn(r["messages"]) + 1
                if k < len(r["messages"]):
                    split.append(dict({key: v for key, v in r.items() if key != "messages"},
                                      prompt=r["messages"][:k], completion=r["messages"][k:]))
            for group in one_dataset_each([split]):
                pc += tool_trl_lines(d, group, model, None)
            # split at the last user message: completions of calls, responses and answers
            for group in one_dataset_each([user_split(recs)]):
                pc_assistant += tool_trl_lines(d, group, model, training,
                                               assistant_only_loss=True)
        for suffix, lines in (("tool_expected", expected), ("tool_prompts", prompts),
                              ("tool_pc_expected", pc),
                              ("tool_pc_assistant_expected", pc_assistant)):
            with open(os.path.join(args.out, f"{name}.{suffix}"), "w") as f:
                f.writelines(lines)
        print(name, "tools:", len(expected) // 2, "records,", len(prompts), "prompts,",
              len(pc) // 2, "prompt/completion")


def tool_trl_lines(tok_dir, records, model, training_template, **options):
    """trl_lines over json_dataset(records); checks that the training template renders the
    original's ids."""
    examples = []
    lines = trl_lines(tok_dir, records, model, training_template, json_dataset, examples,
                      **options)
    fresh = AutoTokenizer.from_pretrained(tok_dir)
    for r, ex in zip(records, examples):
        if "messages" in r:
            tools = r.get("tools")
            tools = json.loads(tools) if isinstance(tools, str) else tools
            orig = fresh.apply_chat_template(r["messages"], tools=tools, tokenize=True,
                                             return_dict=True,
                                             **r.get("chat_template_kwargs", {}))["input_ids"]
            if list(orig) != list(ex["input_ids"]):
                assert os.path.basename(tok_dir) == "qwen3", "the training template differs"
                print(os.path.basename(tok_dir), "tools: a record renders other ids than "
                      "the original template (a think block)")
    return lines


def tojson_fixture(args):
    """tojson.txt: pairs of lines, a JSON text (numbers written in many ways, strings with
    every kind of escape, nested and empty containers, a key given twice) and the JSON array
    of what the chat templates' tojson writes for it: json.dumps(json.loads(text),
    ensure_ascii=False) and the same with indent=4."""
    import random
    import struct
    texts = ["0", "-0", "7", "-7", "12345678901234567890123", "1.0", "1.50", "-0.0", "0.0",
             "1E5", "1e-5", "1e+5", "0.0001", "0.00001", "0.000123", "1e15", "1e16",
             "123456789012345678.0", "9999999999999999.0", "1e400", "-1e400", "1e-400",
             "5e-324", "2.2250738585072014e-308", "1.7976931348623157e308", "0.1", "0.3",
             "100", "2.5e-3", "123456789.123456789", "3.14159265358979323846264338327950288",
             "true", "false", "null", '""',
             r'"q\"b\\s\/\n\t\r\b\f\u0001\u001f\u007f\u00e9\u20ac\ud83d\ude00 end"',
             '"S\u00e3o Paulo \u2028"', "[]", "{}", "[1, [2, []], {}]", " { \"k\" : [ 1 , 2 ] } ",
             '{"b": 1, "a": {"c": [true, null]}, "b": 2}', '{"x": {}, "y": [], "z": [{}]}',
             '{"type": "function", "function": {"name": "f", "parameters": {"type": "object", '
             '"properties": {"a": {"type": "number", "default": 1.5e-7}}}}}']
    rng = random.Random(5)
    for _ in range(200):   # doubles from their bits, written three ways
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if x != x or x in (float("inf"), float("-inf")):
            continue
        texts += [repr(x), "%.17g" % x if "e" in "%.17g" % x or "." in "%.17g" % x
                  else "%.17g.0" % x, "%.20e" % x]
    for _ in range(100):   # powers of two (the shortest digits' uneven neighbourhoods)
        k = rng.randint(-1074, 1023)
        texts.append("%.17e" % (2.0 ** k))
    for _ in range(100):   # decimals of 1 to 20 digits, exponents -30 to 30
        digits = str(rng.randint(1, 10 ** rng.randint(1, 20)))
        texts.append(f"{digits[:1]}.{digits[1:] or '0'}e{rng.randint(-30, 30)}")
    with open(os.path.join(args.out, "tojson.txt"), "w") as f:
        for t in texts:
            v = json.loads(t)
            f.write(t + "\n")
            f.write(json.dumps([json.dumps(v, ensure_ascii=False),
                                json.dumps(v, ensure_ascii=False, indent=4)]) + "\n")
    print("tojson", len(texts), "values")


def write_sums(args):
    sums = []
    for root, _, names in sorted(os.walk(args.out)):
        for f in sorted(names):
            rel = os.path.relpath(os.path.join(root, f), args.out)
            if rel == "SHA256SUMS":
                continue
            with open(os.path.join(root, f), "rb") as fh:
                sums.append(f"{hashlib.sha256(fh.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(args.out, "SHA256SUMS"), "w") as fh:
        fh.writelines(sums)


def all_fixtures(args):
    """NAME.all_expected: SFTTrainer's ids and labels with assistant_only_loss=False (its
    default) and completion_only_loss=False: every token a target, conversations rendered by
    the tokenizer's published template (llama3: records.jsonl, one record of each kind;
    qwen3 and deepseek_r1: their chat and reasoning sets, where the published template
    renders other ids than TRL's training variant; gpt_oss: its chat and own sets; each set
    also as prompt/completion)."""
    sets = {"llama3": ["records"], "qwen3": ["chat_records", "qwen3_records", "chat_pc"],
            "deepseek_r1": ["chat_records", "r1_records", "r1_pc"],
            "gpt_oss": ["chat_records", "gptoss_records", "gptoss_pc"]}
    for name, set_names in sets.items():
        d = os.path.join(args.out, name)
        model = tiny_llama_for(d)
        lines = []
        for set_name in set_names:
            with open(os.path.join(args.out, set_name + ".jsonl")) as f:
                recs = [json.loads(line) for line in f]
            kinds = [[r for r in recs if k in r] for k in ("text", "prompt", "messages")]
            for group in filter(None, kinds):
                lines += trl_lines(d, group, model, completion_only_loss=False)
        for ids, labels in zip(lines[::2], lines[1::2]):   # every token a target
            assert ids.split()[1:] == labels.split()[1:]
        with open(os.path.join(args.out, f"{name}.all_expected"), "w") as f:
            f.writelines(lines)
        print(name, "every token counted", len(lines) // 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "sft"))
    ap.add_argument("--tools-only", action="store_true",
                    help="the tool-use fixtures and tojson.txt alone, with the tokenizers "
                         "already in --out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.utils.chat_template_utils.datetime = FixedClock   # gpt-oss's Current date
    if args.tools_only:
        tool_fixtures(args)
        tojson_fixture(args)
        write_sums(args)
        return
    with open(os.path.join(args.out, "records.jsonl"), "w") as f:
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    llama3_training = open(os.path.join(os.path.dirname(__import__("trl").__file__),
                                        "chat_templates", "llama3_training.jinja")).read()
    training = {"chatml": CHATML_TRAINING, "llama3": llama3_training}
    prepared = {}
    for name, spec in TOKENIZERS.items():
        d = train_tokenizer(name, spec, args.out)
        vocab = Tokenizer.from_file(os.path.join(d, "tokenizer.json")).get_vocab_size()
        prepared[name] = trl_prepare(d, RECORDS, training[name], tiny_llama(vocab, 1))
        with open(os.path.join(args.out, f"{name}.expected"), "w") as f:
            for ids, labels in prepared[name]:
                f.write("ids " + " ".join(map(str, ids)) + "\n")
                f.write("labels " + " ".join(map(str, labels)) + "\n")
        print(name, "vocab", vocab, "lengths", [len(i) for i, _ in prepared[name]],
              "targets", [sum(l != -100 for l in lab[1:]) for _, lab in prepared[name]])
    new_templates(args)
    prompt_fixtures(args)
    pc_fixtures(args)
    all_fixtures(args)
    tool_fixtures(args)
    tojson_fixture(args)
    # the loss with gradient accumulation, on the llama3 examples
    tok = AutoTokenizer.from_pretrained(os.path.join(args.out, "llama3"))
    vocab = Tokenizer.from_file(os.path.join(args.out, "llama3", "tokenizer.json")).get_vocab_size()
    pad = tok.convert_tokens_to_ids("<|end_of_text|>")
    rows = torch.full((len(RECORDS), T), pad, dtype=torch.long)
    labels = torch.full((len(RECORDS), T), -100, dtype=torch.long)
    for i, (ids, lab) in enumerate(prepared["llama3"]):
        assert len(ids) <= T
        rows[i, :len(ids)] = torch.tensor(ids)
        labels[i, :len(ids)] = torch.tensor(lab)
    model = tiny_llama(vocab, 7)
    mdir = os.path.join(args.out, "model")
    model.save_pretrained(mdir, safe_serialization=True)
    for f in os.listdir(mdir):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(mdir, f))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    N = int((labels[:, 1:] != -100).sum())
    losses, means = [], []
    for step in range(2):
        opt.zero_grad()
        total = 0.0
        for k in range(ACCUM):
            sl = slice(k * B, (k + 1) * B)
            out = model(input_ids=rows[sl], labels=labels[sl], num_items_in_batch=N)
            out.loss.backward()
            total += out.loss.item()
            if step == 0:
                with torch.no_grad():
                    means.append(model(input_ids=rows[sl], labels=labels[sl]).loss.item())
        losses.append(total)
        if step == 0:
            grads = {"grad." + n: p.grad.detach().clone().contiguous()
                     for n, p in model.named_parameters()}
        opt.step()
    ref = {"rows": rows.to(torch.int32), "labels": labels.to(torch.int32),
           "loss1": torch.tensor([losses[0]], dtype=torch.float64),
           "loss2": torch.tensor([losses[1]], dtype=torch.float64),
           "mean_of_means": torch.tensor([sum(means) / len(means)], dtype=torch.float64),
           **grads}
    save_file(ref, os.path.join(args.out, "step.safetensors"))
    print(f"N {N}, per micro-batch {[(labels[k*B:(k+1)*B, 1:] != -100).sum().item() for k in range(ACCUM)]}, "
          f"loss1 {losses[0]:.6f}, mean of means {sum(means) / len(means):.6f}, loss2 {losses[1]:.6f}")
    write_sums(args)
    print(json.dumps({"torch": torch.__version__,
                      "transformers": __import__("transformers").__version__,
                      "trl": __import__("trl").__version__,
                      "tokenizers": __import__("tokenizers").__version__}))


if __name__ == "__main__":
    main()
