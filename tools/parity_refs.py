"""Plain-PyTorch references of the BERT family, written from
shared/reference/bert_family_spec.md §2 (no `transformers`): each family is
a list of Hugging Face parameter names with shapes, and functions over a
dict of those tensors.  tools/gen_parity_fixtures.py runs them to write the
fixtures the Lua specs compare against.
"""
import math
import sys

if __name__ == "__main__":   # a module: tools/gen_parity_fixtures.py imports it
    print("usage: import parity_refs (from tools/gen_parity_fixtures.py --family F); not run directly")
    print(__doc__)
    sys.exit(0)

import torch
import torch.nn.functional as F

NEG = torch.finfo(torch.float32).min


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


ACT = {"gelu": F.gelu, "gelu_new": gelu_new, "relu": F.relu, "tanh": torch.tanh}


def lin(P, name, x, bias=True):
    return F.linear(x, P[name + ".weight"], P.get(name + ".bias") if bias else None)


def ln(P, name, x, eps):
    return F.layer_norm(x, x.shape[-1:], P[name + ".weight"], P[name + ".bias"], eps)


def heads_split(t, A):
    B, T, H = t.shape
    return t.view(B, T, A, H // A).transpose(1, 2)


def merge(t):
    B, A, T, d = t.shape
    return t.transpose(1, 2).reshape(B, T, A * d)


def mha(P, names, x, mask, A, q_first=False):
    """names: the q, k, v parameter prefixes; key-padding mask."""
    q, k, v = (heads_split(lin(P, n, x), A) for n in names)
    d = q.shape[-1]
    if q_first:   # DistilBERT scales q before the product
        s = (q / math.sqrt(d)) @ k.transpose(-1, -2)
        s = s.masked_fill(mask[:, None, None, :] == 0, NEG)
    else:
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        s = s + (1.0 - mask[:, None, None, :].float()) * NEG
    return merge(s.softmax(-1) @ v)


def linear_shapes(out, inp, bias=True):
    return [(".weight", (out, inp))] + ([(".bias", (out,))] if bias else [])


class Names:
    """An ordered list of (name, shape, kind) with kind in w (matrix), b (bias), g (LayerNorm weight)."""
    def __init__(s): s.items = []
    def linear(s, name, out, inp, bias=True):
        s.items.append((name + ".weight", (out, inp), "w"))
        if bias: s.items.append((name + ".bias", (out,), "b"))
    def ln(s, name, n):
        s.items.append((name + ".weight", (n,), "g")); s.items.append((name + ".bias", (n,), "b"))
    def emb(s, name, rows, n): s.items.append((name + ".weight", (rows, n), "w"))
    def param(s, name, shape, kind="b"): s.items.append((name, shape, kind))


def bert_layer_names(N, p, H, I, q="query", k="key", v="value"):
    for n in (q, k, v): N.linear(p + "attention.self." + n, H, H)
    N.linear(p + "attention.output.dense", H, H); N.ln(p + "attention.output.LayerNorm", H)
    N.linear(p + "intermediate.dense", I, H); N.linear(p + "output.dense", H, I); N.ln(p + "output.LayerNorm", H)


def bert_layer(P, p, x, mask, c, attention=None):
    A, eps = c["num_attention_heads"], c["layer_norm_eps"]
    ctx = attention(p, x) if attention else mha(P, [p + "attention.self." + n for n in ("query", "key", "value")], x, mask, A)
    x1 = ln(P, p + "attention.output.LayerNorm", lin(P, p + "attention.output.dense", ctx) + x, eps)
    h = ACT[c["hidden_act"]](lin(P, p + "intermediate.dense", x1))
    return ln(P, p + "output.LayerNorm", lin(P, p + "output.dense", h) + x1, eps)


# {============================================================ RoBERTa

def roberta_names(c):
    H, I, V, E = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["hidden_size"]
    N = Names()
    N.emb("roberta.embeddings.word_embeddings", V, H); N.emb("roberta.embeddings.position_embeddings", c["max_position_embeddings"], H)
    N.emb("roberta.embeddings.token_type_embeddings", c["type_vocab_size"], H); N.ln("roberta.embeddings.LayerNorm", H)
    for i in range(c["num_hidden_layers"]): bert_layer_names(N, f"roberta.encoder.layer.{i}.", H, I)
    N.linear("lm_head.dense", H, H); N.ln("lm_head.layer_norm", H); N.param("lm_head.bias", (V,))
    N.linear("classifier.dense", H, H); N.linear("classifier.out_proj", c["num_labels"], H)
    N.linear("qa_outputs", 2, H)
    return N


def roberta_forward(P, c, ids, tt, mask):
    pad = c["pad_token_id"]
    m = ids.ne(pad).long()
    pos = torch.cumsum(m, 1) * m + pad
    e = "roberta.embeddings."
    x = P[e + "word_embeddings.weight"][ids] + P[e + "token_type_embeddings.weight"][tt] + P[e + "position_embeddings.weight"][pos]
    x = ln(P, e + "LayerNorm", x, c["layer_norm_eps"])
    for i in range(c["num_hidden_layers"]): x = bert_layer(P, f"roberta.encoder.layer.{i}.", x, mask, c)
    h = ln(P, "lm_head.layer_norm", F.gelu(lin(P, "lm_head.dense", x)), c["layer_norm_eps"])
    out = {"last_hidden_state": x, "logits": h @ P[e + "word_embeddings.weight"].t() + P["lm_head.bias"]}
    out["seqcls_logits"] = lin(P, "classifier.out_proj", torch.tanh(lin(P, "classifier.dense", x[:, 0])))
    qa = lin(P, "qa_outputs", x)
    out["qa_start_logits"], out["qa_end_logits"] = qa[..., 0], qa[..., 1]
    return out
# }============================================================

# {============================================================ ALBERT

def albert_names(c):
    H, I, V, E = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["embedding_size"]
    N = Names()
    e = "albert.embeddings."
    N.emb(e + "word_embeddings", V, E); N.emb(e + "position_embeddings", c["max_position_embeddings"], E)
    N.emb(e + "token_type_embeddings", c["type_vocab_size"], E); N.ln(e + "LayerNorm", E)
    N.linear("albert.encoder.embedding_hidden_mapping_in", H, E)
    for g in range(c["num_hidden_groups"]):
        for j in range(c["inner_group_num"]):
            p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}."
            N.ln(p + "full_layer_layer_norm", H)
            for n in ("query", "key", "value", "dense"): N.linear(p + "attention." + n, H, H)
            N.ln(p + "attention.LayerNorm", H)
            N.linear(p + "ffn", I, H); N.linear(p + "ffn_output", H, I)
    N.linear("albert.pooler", H, H)
    N.linear("predictions.dense", E, H); N.ln("predictions.LayerNorm", E); N.param("predictions.bias", (V,))
    N.linear("sop_classifier.classifier", 2, H)
    N.linear("classifier", c["num_labels"], H)
    return N


def albert_forward(P, c, ids, tt, mask):
    eps, A, L = c["layer_norm_eps"], c["num_attention_heads"], c["num_hidden_layers"]
    act = ACT[c["hidden_act"]]
    e = "albert.embeddings."
    T = ids.shape[1]
    x = P[e + "word_embeddings.weight"][ids] + P[e + "token_type_embeddings.weight"][tt] + P[e + "position_embeddings.weight"][torch.arange(T)]
    x = ln(P, e + "LayerNorm", x, eps)
    x = lin(P, "albert.encoder.embedding_hidden_mapping_in", x)
    G = c["num_hidden_groups"]
    for i in range(L):
        g = int(i / (L / G))
        for j in range(c["inner_group_num"]):
            p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}."
            ctx = mha(P, [p + "attention." + n for n in ("query", "key", "value")], x, mask, A)
            a = ln(P, p + "attention.LayerNorm", x + lin(P, p + "attention.dense", ctx), eps)
            f = lin(P, p + "ffn_output", act(lin(P, p + "ffn", a)))
            x = ln(P, p + "full_layer_layer_norm", f + a, eps)
    pooled = torch.tanh(lin(P, "albert.pooler", x[:, 0]))
    h = ln(P, "predictions.LayerNorm", act(lin(P, "predictions.dense", x)), eps)
    return {"last_hidden_state": x, "pooler_output": pooled,
            "prediction_logits": h @ P[e + "word_embeddings.weight"].t() + P["predictions.bias"],
            "sop_logits": lin(P, "sop_classifier.classifier", pooled),
            "seqcls_logits": lin(P, "classifier", pooled)}
# }============================================================

# {============================================================ ELECTRA

def electra_names(c):
    H, I, V, E = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["embedding_size"]
    N = Names()
    e = "electra.embeddings."
    N.emb(e + "word_embeddings", V, E); N.emb(e + "position_embeddings", c["max_position_embeddings"], E)
    N.emb(e + "token_type_embeddings", c["type_vocab_size"], E); N.ln(e + "LayerNorm", E)
    N.linear("electra.embeddings_project", H, E)
    for i in range(c["num_hidden_layers"]): bert_layer_names(N, f"electra.encoder.layer.{i}.", H, I)
    N.linear("discriminator_predictions.dense", H, H); N.linear("discriminator_predictions.dense_prediction", 1, H)
    N.linear("generator_predictions.dense", E, H); N.ln("generator_predictions.LayerNorm", E)
    N.param("generator_lm_head.bias", (V,))
    N.linear("classifier.dense", H, H); N.linear("classifier.out_proj", c["num_labels"], H)
    return N


def electra_forward(P, c, ids, tt, mask):
    eps = c["layer_norm_eps"]
    e = "electra.embeddings."
    T = ids.shape[1]
    x = P[e + "word_embeddings.weight"][ids] + P[e + "token_type_embeddings.weight"][tt] + P[e + "position_embeddings.weight"][torch.arange(T)]
    x = lin(P, "electra.embeddings_project", ln(P, e + "LayerNorm", x, eps))
    for i in range(c["num_hidden_layers"]): x = bert_layer(P, f"electra.encoder.layer.{i}.", x, mask, c)
    act = ACT[c["hidden_act"]]
    disc = lin(P, "discriminator_predictions.dense_prediction", act(lin(P, "discriminator_predictions.dense", x))).squeeze(-1)
    g = ln(P, "generator_predictions.LayerNorm", F.gelu(lin(P, "generator_predictions.dense", x)), eps)
    return {"last_hidden_state": x, "logits": disc,
            "generator_logits": g @ P[e + "word_embeddings.weight"].t() + P["generator_lm_head.bias"],
            "seqcls_logits": lin(P, "classifier.out_proj", F.gelu(lin(P, "classifier.dense", x[:, 0])))}
# }============================================================

# {============================================================ DistilBERT

def distilbert_names(c):
    H, I, V = c["dim"], c["hidden_dim"], c["vocab_size"]
    N = Names()
    e = "distilbert.embeddings."
    N.emb(e + "word_embeddings", V, H); N.emb(e + "position_embeddings", c["max_position_embeddings"], H)
    N.ln(e + "LayerNorm", H)
    for i in range(c["n_layers"]):
        p = f"distilbert.transformer.layer.{i}."
        for n in ("q_lin", "k_lin", "v_lin", "out_lin"): N.linear(p + "attention." + n, H, H)
        N.ln(p + "sa_layer_norm", H)
        N.linear(p + "ffn.lin1", I, H); N.linear(p + "ffn.lin2", H, I); N.ln(p + "output_layer_norm", H)
    N.linear("vocab_transform", H, H); N.ln("vocab_layer_norm", H); N.param("vocab_projector.bias", (V,))
    N.linear("pre_classifier", H, H); N.linear("classifier", c["num_labels"], H)
    return N


def distilbert_forward(P, c, ids, tt, mask):
    eps, A = 1e-12, c["n_heads"]
    act = ACT[c["activation"]]
    e = "distilbert.embeddings."
    T = ids.shape[1]
    x = ln(P, e + "LayerNorm", P[e + "word_embeddings.weight"][ids] + P[e + "position_embeddings.weight"][torch.arange(T)], eps)
    for i in range(c["n_layers"]):
        p = f"distilbert.transformer.layer.{i}."
        ctx = mha(P, [p + "attention." + n for n in ("q_lin", "k_lin", "v_lin")], x, mask, A, q_first=True)
        sa = ln(P, p + "sa_layer_norm", lin(P, p + "attention.out_lin", ctx) + x, eps)
        f = lin(P, p + "ffn.lin2", act(lin(P, p + "ffn.lin1", sa)))
        x = ln(P, p + "output_layer_norm", f + sa, eps)
    h = ln(P, "vocab_layer_norm", act(lin(P, "vocab_transform", x)), eps)
    return {"last_hidden_state": x, "logits": h @ P[e + "word_embeddings.weight"].t() + P["vocab_projector.bias"],
            "seqcls_logits": lin(P, "classifier", F.relu(lin(P, "pre_classifier", x[:, 0])))}
# }============================================================

# {============================================================ DeBERTa v2/v3

def deberta_names(c):
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    E = c.get("embedding_size", H)
    N = Names()
    e = "deberta.embeddings."
    N.emb(e + "word_embeddings", V, E); N.emb(e + "position_embeddings", c["max_position_embeddings"], E)
    if E != H: N.linear(e + "embed_proj", H, E, bias=False)
    N.ln(e + "LayerNorm", H)
    for i in range(c["num_hidden_layers"]):
        p = f"deberta.encoder.layer.{i}."
        bert_layer_names(N, p, H, I, "query_proj", "key_proj", "value_proj")
        if not c["share_att_key"]:
            N.linear(p + "attention.self.pos_key_proj", H, H); N.linear(p + "attention.self.pos_query_proj", H, H)
    N.emb("deberta.encoder.rel_embeddings", 2 * c["position_buckets"], H)
    N.ln("deberta.encoder.LayerNorm", H)
    N.linear("cls.predictions.transform.dense", E, H); N.ln("cls.predictions.transform.LayerNorm", E)
    N.param("cls.predictions.bias", (V,))
    N.linear("pooler.dense", H, H); N.linear("classifier", c["num_labels"], H)
    return N


def make_log_bucket_position(relative_pos, bucket_size, max_position):
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid), torch.tensor(mid - 1).type_as(relative_pos),
                          torch.abs(relative_pos))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)


def deberta_forward(P, c, ids, tt, mask):
    eps, A, H = c["layer_norm_eps"], c["num_attention_heads"], c["hidden_size"]
    e = "deberta.embeddings."
    B, T = ids.shape
    x = P[e + "word_embeddings.weight"][ids]
    if e + "embed_proj.weight" in P: x = lin(P, e + "embed_proj", x, bias=False)
    x = ln(P, e + "LayerNorm", x, eps) * mask[..., None].float()
    S = c["position_buckets"]
    max_pos = c["max_relative_positions"] if c["max_relative_positions"] > 0 else c["max_position_embeddings"]
    rel_pos = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    rel_pos = make_log_bucket_position(rel_pos, S, max_pos).long()
    R = ln(P, "deberta.encoder.LayerNorm", P["deberta.encoder.rel_embeddings.weight"], eps)[: 2 * S]
    pair = (mask[:, None, :, None] * mask[:, None, None, :]).bool()     # [B, 1, T, T]

    def attention(p, h):
        s = p + "attention.self."
        q, k, v = (heads_split(lin(P, s + n, h), A) for n in ("query_proj", "key_proj", "value_proj"))
        d = q.shape[-1]
        scale = math.sqrt(d * 3)
        kr = lin(P, s + ("key_proj" if c["share_att_key"] else "pos_key_proj"), R)
        qr = lin(P, s + ("query_proj" if c["share_att_key"] else "pos_query_proj"), R)
        kr = kr.view(2 * S, A, d).transpose(0, 1)      # [A, 2S, d]
        qr = qr.view(2 * S, A, d).transpose(0, 1)
        scores = q @ k.transpose(-1, -2) / scale
        c2p = q @ kr.transpose(-1, -2)                 # [B, A, T, 2S]
        c2p_pos = torch.clamp(rel_pos + S, 0, 2 * S - 1)
        scores = scores + torch.gather(c2p, -1, c2p_pos.expand(B, A, T, T)) / scale
        p2c = k @ qr.transpose(-1, -2)                 # [B, A, T(key), 2S]
        p2c_pos = torch.clamp(-rel_pos + S, 0, 2 * S - 1)
        scores = scores + torch.gather(p2c, -1, p2c_pos.expand(B, A, T, T)).transpose(-1, -2) / scale
        # XSoftmax: masked scores to min, softmax, masked probabilities to 0
        probs = scores.masked_fill(~pair, NEG).softmax(-1).masked_fill(~pair, 0.0)
        return merge(probs @ v)

    for i in range(c["num_hidden_layers"]):
        x = bert_layer(P, f"deberta.encoder.layer.{i}.", x, mask, c, attention=attention)
    act = ACT[c["hidden_act"]]
    h = ln(P, "cls.predictions.transform.LayerNorm", act(lin(P, "cls.predictions.transform.dense", x)), eps)
    return {"last_hidden_state": x, "logits": h @ P[e + "word_embeddings.weight"].t() + P["cls.predictions.bias"],
            "seqcls_logits": lin(P, "classifier", F.gelu(lin(P, "pooler.dense", x[:, 0])))}
# }============================================================

FAMILIES = {
    "roberta": (roberta_names, roberta_forward),
    "albert": (albert_names, albert_forward),
    "electra": (electra_names, electra_forward),
    "distilbert": (distilbert_names, distilbert_forward),
    "deberta-v2": (deberta_names, deberta_forward),
}
