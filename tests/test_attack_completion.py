"""Tab after a dot (stepdbg/agent/views/completion.py, asked by the `complete` op) runs none
of the user's code, attacked in a real job: an object whose `__class__` is a property, one with
its own `__getattribute__`, a metaclass's `__getattribute__` and `__dir__`, a `__dict__` that is a
dict subclass, names that are str subclasses, a key whose hash collides with a name's, a value
whose metaclass has `__getattr__`. Each of these ran the user's code before (isinstance read
`__class__`, type.__dir__ read a class's `__dict__` and `__bases__` through its metaclass, `in`
and `[]` called the dict subclass's methods, a set hashed the keys). The frame is unchanged, and
the text before the dot is never evaluated beyond a name. It was asked by an evaluated line,
`__import__(...)`: a script's own global `__import__` ran."""

from __future__ import annotations

import textwrap

import pytest
from conftest import WAIT

from stepdbg import client
from tui.repl_complete import AFTER_DOT, attribute_names_now

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import builtins
import torch
from torch import nn

ran = []

class ClassProperty:
    @property
    def __class__(self):
        ran.append("__class__ property")
        return int

class Spy:
    def __getattribute__(self, name):
        ran.append("__getattribute__ " + name)
        return object.__getattribute__(self, name)

class Meta(type):
    def __getattribute__(cls, name):
        ran.append("metaclass __getattribute__ " + name)
        return type.__getattribute__(cls, name)

    def __dir__(cls):
        ran.append("metaclass __dir__")
        return []

class Metaed(metaclass=Meta):
    value = 1

class LoudDict(dict):
    def __iter__(self):
        ran.append("dict subclass __iter__")
        return dict.__iter__(self)

    def __contains__(self, key):
        ran.append("dict subclass __contains__")
        return dict.__contains__(self, key)

    def __getitem__(self, key):
        ran.append("dict subclass __getitem__")
        return dict.__getitem__(self, key)

class Plain:
    pass

class LoudName(str):
    def __hash__(self):
        ran.append("name __hash__")
        return str.__hash__(self)

    def __eq__(self, other):
        ran.append("name __eq__")
        return str.__eq__(self, other)

    def startswith(self, *args):
        ran.append("name startswith")
        return str.startswith(self, *args)

class Collides:
    def __hash__(self):
        return hash("head")

    def __eq__(self, other):
        ran.append("colliding key __eq__")
        return False

class ValueMeta(type):
    def __getattr__(cls, name):
        ran.append("value's metaclass __getattr__ " + name)
        raise AttributeError(name)

class Valued(metaclass=ValueMeta):
    pass

class HasValue:
    v = Valued()

cp, spy, metaed = ClassProperty(), Spy(), Metaed()
odd = Plain()
odd.__dict__ = LoudDict(inner=Plain())
names = Plain()
setattr(names, LoudName("loud"), 1)
names.lower = 2
holder = Plain()
holder.__dict__[Collides()] = 1
holder.head = Plain()
holder.head.weight = 3
hv = HasValue()
def __import__(*args, **kwargs):  # (a script's own: the line `__import__(...)` of the eval called it)
    ran.append("the frame's __import__")
    return builtins.__import__(*args, **kwargs)

ran.clear()

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
print(f"ran={ran}", flush=True)
"""

ASKED = [("cp", "", ""), ("spy", "", ""), ("metaed", "val", "value"), ("Metaed", "val", "value"),
         ("odd.inner", "", ""), ("names", "lo", "lower"), ("holder.head", "we", "weight"), ("hv.v", "", ""),
         ("model", "we", "weight"), ("loss", "grad_f", "grad_fn"), ("opt", "param_g", "param_groups")]


def test_tab_after_a_dot_runs_none_of_the_users_code_in_a_job(start_job, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    job = start_job("--break", "step==1", script=script)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        ids = "hash(tuple((k, id(v)) for k, v in globals().items()))"  # (no repr of the user's: the Locals' runs some)
        frame = c.evaluate(ids)["value"]
        said = {(dotted, prefix): attribute_names_now(c, dotted, prefix) for dotted, prefix, _ in ASKED}
        assert c.evaluate("ran")["value"] == "[]"
        assert said == {(dotted, prefix): want.split() for dotted, prefix, want in ASKED}, said
        assert c.evaluate(ids)["value"] == frame
        for dotted, prefix, why in (("nosuch", "", "no nosuch in the paused frame"),
                                    ("a[0]", "", "complete takes a dotted name"), ("model", "x y", "complete takes")):
            with pytest.raises(client.ClientError) as e:
                c.attribute_names(dotted, prefix)
            assert e.value.code == "bad_args" and why in str(e.value), e.value
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0, err
    assert out.splitlines()[-1] == "ran=[]", out


@pytest.mark.parametrize("typed", ["f().x", "a[0].b", "getattr(x,'y').z", "(lambda: open('/tmp/pwn','w'))().x",
                                   "'a'.up", "x().y.z", "{}.ke", "1 .real"])
def test_the_text_before_the_dot_is_only_ever_a_name(typed):
    """A call, an index, a literal before the dot: nothing is asked of the job."""
    assert AFTER_DOT.search(typed) is None


def test_a_proxy_whose_dict_descriptor_reads_the_wrapped_object_runs_nothing():
    """wrapt's ObjectProxy (a C type) has a `__dict__` descriptor of its own that reads the
    wrapped object's `__dict__` attribute: its __getattribute__ ran. Only Python's own
    `__dict__` descriptors are read (a class's, a function's, a module's); wrapt is not among
    the test extra's packages: this test runs where it is installed."""
    from stepdbg.agent.views import completion

    wrapt = pytest.importorskip("wrapt")
    ran: list[str] = []

    class Target:
        def __getattribute__(self, name: str) -> object:
            ran.append(name)
            return object.__getattribute__(self, name)

    proxy = wrapt.ObjectProxy(Target())
    ran.clear()
    assert completion.attribute_names(proxy, (), "") == ""
    assert ran == []

    def f() -> None: ...

    f.tag = 1  # type: ignore[attr-defined]
    assert completion.attribute_names(f, (), "ta") == "tag"  # (a function's own __dict__: Python's)
