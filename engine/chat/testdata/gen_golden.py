"""Regenerates the golden files of engine/chat from Python's jinja2 set up as Hugging Face
transformers does in apply_chat_template (ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, loopcontrols, {% generation %}, raise_exception, strftime_now, tojson).

    python3 gen_golden.py   # jinja2 3.1.6; run from this folder

templates.golden.json: every template of ../../../../shared/testdata/templates rendered for two
conversations (with and without a system message). snippets.golden.json: small templates that
exercise the constructs chat templates rely on. Clock fixed at 2024-09-05 14:03:07.
"""
import datetime, glob, json, os

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED = datetime.datetime(2024, 9, 5, 14, 3, 7)
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "shared", "testdata", "templates")


class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED.strftime(fmt)

    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = strftime_now
    return e


CONVERSATIONS = {
    "system": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hello"},
               {"role": "assistant", "content": "Hi there"}, {"role": "user", "content": "How are you?"}],
    "nosystem": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"},
                 {"role": "user", "content": "How are you?"}],
}

# Each snippet is rendered with HF's environment and the standard conversation.
SNIPPETS = [
 ("strip", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a '.lstrip() }}|{{ ' a  '.rstrip() }}|"),
 ("split", "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a</think>b</think>c'.split('</think>')[-1] }}|{{ 'a b c'.split(' ', 1) }}"),
 ("startsends", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x','h')) }}"),
 ("case", "{{ 'AbC'.upper() }} {{ 'AbC'.lower() }} {{ 'hello world'.title() }} {{ 'hello'|upper }} {{ 'hello world'|title }} {{ 'hELLO'|capitalize }}"),
 ("items", "{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in {'z': 1, 'y': 2}|items %}{{ k }}{{ v }}{% endfor %}"),
 ("get", "{% set d = {'a': 1} %}{{ d.get('a') }} {{ d.get('b') }} {{ d.get('b', 'dflt') }} {{ messages[0].get('role') }} {{ messages[0].get('tool_calls', 'none') }}"),
 ("length", "{{ messages|length }} {{ 'héllo'|length }} {{ {'a':1}|length }} {{ messages|count }}"),
 ("loop", "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}"),
 ("loopcycle", "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {% endfor %}"),
 ("namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
 ("trim", "[{{ '  x \n'|trim }}][{{ messages[0]['content']|trim }}]"),
 ("slicing", "{{ 'hello'[::-1] }} {{ 'hello'[1:] }} {{ 'hello'[:-1] }} {{ 'hello'[1:4:2] }} {{ messages[1:]|length }} {{ messages[::-1][0].role }} {{ messages[-1].content }} {{ 'abc'[0] }} {{ 'abc'[-1] }}"),
 ("tests", "{{ x is defined }} {{ messages is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is string }} {{ messages[0] is mapping }} {{ messages is mapping }} {{ messages is iterable }} {{ 'a' is iterable }} {{ messages is sequence }} {{ 1 is number }} {{ 1.5 is number }} {{ true is boolean }} {{ tools is none }} {{ tools is defined }} {{ x is undefined }} {{ 3 is odd }} {{ 4 is even }} {{ 1 is integer }} {{ 1.0 is float }}"),
 ("in", "{{ 'ell' in 'hello' }} {{ 'z' in 'hello' }} {{ 'z' not in 'hello' }} {{ 'role' in messages[0] }} {{ 'tool_calls' in messages[0] }} {{ 2 in [1,2] }} {{ 'a' in {'a': 1} }}"),
 ("dictlit", "{% set m = {'role': 'user', 'content': 'x', 'n': 1} %}{{ m.role }} {{ m['content'] }} {{ m.n + 1 }} {{ m.missing is defined }}"),
 ("tojson_basic", "{{ {'b': 1, 'a': [1, 2.5, 'x', true, none], 'c': {'d': 'é\"\\n'}}|tojson }}"),
 ("tojson_indent", "{{ {'b': 1, 'a': [1, {'y': 2}], 'e': [], 'f': {}}|tojson(indent=2) }}"),
 ("tojson_scalars", "{{ 'héllo <b> & \\'q\\''|tojson }} {{ 1|tojson }} {{ 1.0|tojson }} {{ 0.1|tojson }} {{ 1e20|tojson }} {{ 1.5e-7|tojson }} {{ none|tojson }} {{ true|tojson }} {{ [] |tojson }} {{ messages[0]|tojson }} {{ 'tab\there\x01'|tojson }}"),
 ("tojson_sort", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ {'b': 1}|tojson(separators=(',', ':')) }} {{ 'é'|tojson(ensure_ascii=true) }}"),
 ("render_values", "[{{ none }}][{{ true }}][{{ false }}][{{ [1, 'a', none, true] }}][{{ {'a': 'b'} }}][{{ 1.0 }}][{{ 2.50 }}][{{ 10 // 3 }}][{{ 10 / 4 }}][{{ 7 % 3 }}][{{ 2 ** 3 }}][{{ undefined_thing }}][{{ 1e20 }}][{{ 0.1 + 0.2 }}]"),
 ("concat", "{{ 'a' ~ 1 ~ none }} {{ 'a' + 'b' }} {{ '=' * 3 }} {{ [1] + [2] }}"),
 ("format", "{{ '%s-%d' % ('a', 3) }} {{ '{}+{}'.format(1, 'x') }} {{ 'x'|replace('x', 'y') }} {{ '{name}'.format(name='n') }}"),
 ("filters", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|map(attribute='role')|join(',') }} {{ messages|rejectattr('role', 'equalto', 'system')|map(attribute='role')|first }} {{ (messages|last).content }} {{ [3,1,2]|sort|join }} {{ [1,1,2]|unique|list }} {{ [1,2]|reverse|list }} {{ x|default('d') }} {{ ''|default('e', true) }} {{ '5'|int + 1 }} {{ 5|string ~ 'x' }} {{ [1,2,3]|sum }} {{ [1,5,2]|max }} {{ 'a b'|wordcount }}"),
 ("macro", "{% macro f(x, y='d') %}<{{ x }}{{ y }}>{% endmacro %}{{ f(1) }}{{ f(2, y='z') }}{{ f(3, 'w') }}"),
 ("loopcontrols", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
 ("forelse", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}{% for m in messages if m.role == 'user' %}{{ m.content }};{% endfor %}"),
 ("ifexpr", "{{ 'y' if messages else 'n' }} {{ 'y' if not messages else 'n' }} {{ 1 if none else 2 }} {{ (1 == 1) and (2 > 1) or false }}"),
 ("whitespace", "{% for m in messages %}\n  {% if m.role == 'user' %}\n    U:{{ m.content }}\n  {% else %}\n    O:{{ m.role }}\n  {% endif %}\n{% endfor %}\nend\n"),
 ("whitespace2", "a  {%- if true %}  b  {% endif -%}  c\n  {%+ if true %}d{% endif %}\n{# comment #}\ne {{- ' f ' -}} g\n    {% set x = 1 %}\nh{{ x }}\n"),
 ("whitespace3", "<<{% if true %}\nX\n{% endif %}\n>>\n  {{ 'v' }}\n"),
 ("strftime", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%A %a %B %b %j %p %I %y %%') }}|{{ strftime_now('%-d') if false else '' }}"),
 ("set_block", "{% set x %}inner {{ 1 }}{% endset %}[{{ x }}]"),
 ("strmisc", "{{ 'a-b'.replace('-', '+') }} {{ 'abc'.find('c') }} {{ ','.join(['a', 'b']) }} {{ 'ab'.count('a') }} {{ 'x'.center(5, '*') }} {{ 'Ab'.swapcase() }} {{ 'a\\nb'.splitlines() }} {{ '12'.isdigit() }} {{ 'a b'.rsplit(' ', 1) }} {{ 'abc'.removeprefix('a') }}"),
 ("unicode", "{{ '日本語'[1] }} {{ '日本語'|length }} {{ '日本語'[::-1] }} {{ 'ÉCOLE'.lower() }}"),
 ("raise", "{% if messages|length > 1 %}{{ raise_exception('boom: too many') }}{% endif %}ok"),
 ("generation", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}"),
 ("bos", "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}"),
 ("content_string", "{% for m in messages %}{% if m.content is string %}s{% else %}o{% endif %}{% endfor %}"),
 ("compare", "{{ 'a' < 'b' }} {{ [1,2] == [1,2] }} {{ messages[0].role == 'system' }} {{ none == none }} {{ 1 == 1.0 }} {{ 'a' != 'b' }}"),
 ("ws_inline", "{% for m in messages %}{{ m.role }} {% if loop.last %}L{% endif %}\t{# c #}|{% endfor %}\n  {%+ if true %}keep{% endif %}\n\t{# indented comment #}\nx"),
 ("ws_dictclose", "{{ {'a': {'b': 1}}['a']['b'] }}  {% if true %}y{% endif %}\n   {% if true %}z{% endif %}"),
 ("ws_raw", "{% raw %}  {% not a tag %} {{ x }}{% endraw %}\n  {% if true %}r{% endif %}"),
 ("ws_dash", "a\n  {%- if true -%}\n  b\n  {%- endif %}\n  c {{- ' d ' }}  {{ 'e' -}}  \n f"),
 ("strings", "{{ \"it's\" }} {{ 'say \"hi\"' }} {{ 'a\\tb' }} {{ '%}' }} {{ \"}}\" }}\n  {% if '%}' %}q{% endif %}"),
 ("items_nested", "{% set d = {'z': {'y': 1, 'x': 2}, 'a': [1]} %}{% for k, v in d.items() %}{{ k }}:{{ v|tojson }};{% endfor %}{{ d.get('z')|tojson }}{{ d.keys()|list }}{{ d.values()|list|length }}{% for k in d %}{{ k }}{% endfor %}"),
 ("split_more", "{{ 'a  b c'.split(None, 1) }} {{ '  a b c  '.rsplit(None, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x'.center(4) }}|{{ 'x'.ljust(3, '.') }}|{{ 'x'.rjust(3) }}|{{ 'ab'.center(5, '*') }}"),
 ("percent", "{{ '%s-%d' % ('a', 3) }} {{ '<%s>' % messages[0].role|upper }} {{ 'x' ~ '%05.1f|%-4s|%x|%r|%e|%g|%+d|%3d|%c' % (3.14159, 'ab', 255, 'q', 12345.678, 0.0001, 5, 7, 65) }} {{ '%(a)s=%(b)d' % {'a': 'k', 'b': 2} }} {{ '100%%' % () }} {% set s = 'n=%d' % (messages|length) %}{{ s }} {{ 7 % 3 }}{% for m in messages %}{{ loop.index0 % 2 }}{% endfor %} {{ \"%s\" % messages[1]['content'] ~ '!' }}"),
 ("literals", r"""{{ 'a\nb' }}|{{ "tab\there" }}|{{ 'q\'s' }}|{{ "dq\"s" }}|{{ 'back\\slash' }}|{{ '\\' }}|{{ 'x\q' }}|{{ '\u00e9\x41\101\U0001F600' }}|{{ 'line\
cont' }}|{{ '日本' }}|{{ '\n'|length }}|{{ 'a' 'b' }}|{{ "it's" ~ 'say "x"' }}|{% if '\\' in 'a\\b' %}in{% endif %}|{{ '\'%s\'' % 'p' }}"""),
 ("trim_chars", "{{ '--a--'|trim('-') }} {{ 12|trim }} {{ '\u3000a\u3000'|trim }}"),
]


def render(src, msgs):
    try:
        return {"out": env().from_string(src).render(messages=msgs, tools=None, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")}
    except Exception as ex:
        return {"error": "%s: %s" % (type(ex).__name__, ex)}


def main():
    tpl = []
    for f in sorted(glob.glob(os.path.join(TEMPLATES, "*.jinja"))):
        src = open(f, encoding="utf-8").read()
        for name, msgs in CONVERSATIONS.items():
            tpl.append(dict(template=os.path.basename(f), conversation=name, **render(src, msgs)))
    snips = [dict(name=n, src=s, **render(s, CONVERSATIONS["system"])) for n, s in SNIPPETS]
    for path, data in (("templates.golden.json", tpl), ("snippets.golden.json", snips)):
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
