"""Regenerates harmony.golden.json: gpt-oss's chat template (openai-gpt-oss-120b.jinja, the
template the gpt-oss GGUFs carry, as llama.cpp keeps it in models/templates) rendered by
Python's jinja2 set up as transformers does (gen_golden.py's environment), for the golden
conversations (and one that ends with the assistant's answer) with and without a
generation prompt.

    python3 gen_harmony.py   # jinja2 3.1.6; run from this folder
"""
import json

from gen_golden import CONVERSATIONS, env


def main():
    src = open("openai-gpt-oss-120b.jinja", encoding="utf-8").read()
    convs = dict(CONVERSATIONS)
    # An assistant turn last: without a generation prompt it closes with <|return|>.
    convs["answered"] = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}]
    out = []
    for name, msgs in convs.items():
        for gen in (True, False):
            r = env().from_string(src).render(messages=msgs, tools=None, add_generation_prompt=gen,
                                              bos_token="<|startoftext|>", eos_token="<|return|>")
            out.append(dict(conversation=name, add_generation_prompt=gen, out=r))
    with open("harmony.golden.json", "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
