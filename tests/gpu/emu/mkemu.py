#!/usr/bin/env python3
"""mkemu.py SRCDIR OUTDIR: copies the CUDA kernel sources of SRCDIR
(cuda_kern*.cu, .cuh, .h) to OUTDIR, rewritten for the host emulator emu.h:

  k<<<grid, block, shmem, stream>>>(args);
      -> emu_launch("k", __FILE__, __LINE__, dim3(grid), dim3(block), shmem,
                    [&]() { k(args); });
  extern __shared__ T name[];      -> T *name = (T *)emu_dyn_shared;
  __shared__ T name[dims];         -> static T name[dims];
                                      emu_shared_poison(name, sizeof name);

The stream is dropped (a launch finishes before emu_launch returns). Line
numbers are kept and each file starts with a #line naming its source, so
compiler messages and the kernels' own __FILE__:__LINE__ point into
SRCDIR. Writes OUTDIR/emu_kernels.inc, which includes every .cu file.
Anything it cannot rewrite (a launch or __shared__ left over) is an error:
exit 1 with the file and line.
"""
import os
import re
import sys


def die(msg):
    sys.stderr.write('mkemu.py: %s\n' % msg)
    sys.exit(1)


def line_of(text, pos):
    return text.count('\n', 0, pos) + 1


def split_top(s):
    """Splits s at the commas outside any brackets."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    out.append(cur.strip())
    return out


def close_paren(text, i, path):
    """Index just past the ')' that closes the '(' at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == '(':
            depth += 1
        elif text[j] == ')':
            depth -= 1
            if depth == 0:
                return j + 1
    die('%s:%d: unbalanced parentheses in a launch' % (path, line_of(text, i)))


# the kernel's name, with template arguments, right before <<<
KNAME = re.compile(r'([A-Za-z_]\w*(?:\s*<[^<>;(){}]*>)?)\s*$')


def rewrite_launches(text, path):
    out, pos, n = [], 0, 0
    while True:
        at = text.find('<<<', pos)
        if at < 0:
            break
        m = KNAME.search(text, pos, at)
        if not m:
            die('%s:%d: no kernel name before <<<' % (path, line_of(text, at)))
        end_cfg = text.find('>>>', at)
        if end_cfg < 0:
            die('%s:%d: <<< without >>>' % (path, line_of(text, at)))
        cfg = split_top(text[at + 3:end_cfg])
        if not 2 <= len(cfg) <= 4:
            die('%s:%d: a launch takes 2 to 4 arguments in <<< >>>, not %d'
                % (path, line_of(text, at), len(cfg)))
        while len(cfg) < 3:
            cfg.append('0')
        i = end_cfg + 3
        while text[i].isspace():
            i += 1
        if text[i] != '(':
            die('%s:%d: no argument list after >>>' % (path, line_of(text, at)))
        end_args = close_paren(text, i, path)
        j = end_args
        while j < len(text) and text[j].isspace():
            j += 1
        if j >= len(text) or text[j] != ';':
            die('%s:%d: a launch must be a statement of its own' % (path, line_of(text, at)))
        kname, args = m.group(1), text[i + 1:end_args - 1]
        # keep the line count: the newlines of the launch go after it
        newlines = text.count('\n', m.start(1), j + 1)
        out.append(text[pos:m.start(1)])
        out.append('emu_launch("%s", __FILE__, __LINE__, dim3(%s), dim3(%s), %s, [&]() { %s(%s); });'
                   % (re.sub(r'\s+', '', kname), cfg[0], cfg[1], cfg[2], kname,
                      ' '.join(args.split())))
        out.append('\n' * newlines)
        pos = j + 1
        n += 1
    out.append(text[pos:])
    return ''.join(out), n


EXT_SHARED = re.compile(r'extern\s+__shared__\s+([\w ]+?)\s*(\w+)\s*\[\s*\]\s*;')
SHARED = re.compile(r'__shared__\s+([\w ]+?)\s*(\w+)\s*((?:\[[^\];]+\])+)\s*;')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def rewrite(text, path):
    text, n = rewrite_launches(text, path)
    text = EXT_SHARED.sub(lambda m: '%s *%s = (%s *)emu_dyn_shared;'
                          % (m.group(1), m.group(2), m.group(1)), text)
    text = SHARED.sub(lambda m: 'static %s %s%s; emu_shared_poison(%s, sizeof %s);'
                      % (m.group(1), m.group(2), m.group(3), m.group(2), m.group(2)), text)
    code = COMMENT.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)
    for word in ('<<<', '__shared__'):
        at = code.find(word)
        if at >= 0:
            die('%s:%d: cannot rewrite this %s for the emulator'
                % (path, line_of(code, at), word))
    return text, n


def main():
    if len(sys.argv) != 3:
        die('usage: mkemu.py SRCDIR OUTDIR')
    src, dst = sys.argv[1], sys.argv[2]
    names = sorted(f for f in os.listdir(src) if f.startswith('cuda_kern')
                   and f.endswith(('.cu', '.cuh', '.h')))
    if not any(f.endswith('.cu') for f in names):
        die("no cuda_kern*.cu in '%s'" % src)
    os.makedirs(dst, exist_ok=True)
    launches = 0
    for f in names:
        path = os.path.abspath(os.path.join(src, f))
        with open(path) as fp:
            text, n = rewrite(fp.read(), path)
        launches += n
        with open(os.path.join(dst, f), 'w') as fp:
            fp.write('#line 1 "%s"\n' % path)
            fp.write(text)
    with open(os.path.join(dst, 'emu_kernels.inc'), 'w') as fp:
        fp.write('/* generated by mkemu.py: every kernel source */\n')
        for f in names:
            if f.endswith('.cu'):
                fp.write('#include "%s"\n' % f)
    print('mkemu.py: %d files, %d launches rewritten' % (len(names), launches))


main()
