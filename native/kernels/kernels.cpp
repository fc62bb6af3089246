// Hot kernels of the mapping policies, bound to Python as pinwise._kernels.
//
// - max_weight_matching: exact maximum-weight matching of the threads (Edmonds' blossom algorithm,
//   through LEMON's MaxWeightedPerfectMatching on the complete graph; with non-negative weights a
//   maximum-weight perfect matching has the weight of a maximum-weight matching). Mazouz et al.,
//   section 3.2: "maximum-weight matching in general graphs ... algorithm of Edmonds".
// - greedy_groups: one level of EagerMap's bottom-up grouping (Cruz et al.; Diener et al. section 4,
//   "Locality"): groups of `size` elements, each seeded by the heaviest free element and grown by the
//   element with the most communication to the group.
// - refine_swaps: local search on a placement: swap two threads, or move one to a free slot,
//   whenever that lowers sum M[i][j] * dist(slot i, slot j).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <queue>
#include <stdexcept>
#include <utility>
#include <vector>

#ifdef PINWISE_HAVE_LEMON
#include <lemon/matching.h>
#include <lemon/smart_graph.h>
#endif

namespace py = pybind11;

namespace {

using IntArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Int32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

bool have_exact_matching()
{
#ifdef PINWISE_HAVE_LEMON
    return true;
#else
    return false;
#endif
}

#ifdef PINWISE_HAVE_LEMON
using Graph = lemon::SmartGraph;
using Matching = lemon::MaxWeightedPerfectMatching<Graph, Graph::EdgeMap<int64_t>>;

// Solve on the edges marked in `present` (m x m); fill mate. Returns false if some edge left out
// violates the dual solution (those edges are then marked present, for another round).
template <class Weight>
bool solve_on(int64_t m, std::vector<uint8_t> &present, const Weight &weight, std::vector<int32_t> &mate)
{
    Graph graph;
    graph.reserveNode(static_cast<int>(m));
    std::vector<Graph::Node> nodes;
    for (int64_t i = 0; i < m; i++)
        nodes.push_back(graph.addNode());
    Graph::EdgeMap<int64_t> cost(graph);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++)
            if (present[i * m + j]) {
                auto edge = graph.addEdge(nodes[i], nodes[j]);
                cost[edge] = weight(i, j);
            }
    Matching matching(graph, cost);
    if (!matching.run())
        throw std::runtime_error("no perfect matching on the candidate edges: cannot happen");
    for (int64_t i = 0; i < m; i++)
        mate[i] = graph.id(matching.mate(nodes[i]));
    // Dual feasibility on every edge left out proves optimality on the complete graph:
    // y_u + y_v + sum of z_B over blossoms holding both u and v >= dualScale * w_uv.
    std::vector<int64_t> y(m);
    for (int64_t i = 0; i < m; i++)
        y[i] = matching.nodeValue(nodes[i]);
    std::vector<std::vector<std::pair<int, int64_t>>> blossoms_of(m);
    for (int b = 0; b < matching.blossomNum(); b++) {
        int64_t z = matching.blossomValue(b);
        for (Matching::BlossomIt it(matching, b); it != lemon::INVALID; ++it)
            blossoms_of[graph.id(it)].push_back({b, z});
    }
    for (auto &list : blossoms_of)
        std::sort(list.begin(), list.end());
    bool optimal = true;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++) {
            if (present[i * m + j])
                continue;
            int64_t slack = y[i] + y[j] - Matching::dualScale * weight(i, j);
            const auto &a = blossoms_of[i], &b = blossoms_of[j];
            for (size_t p = 0, q = 0; p < a.size() && q < b.size();) {
                if (a[p].first == b[q].first) {
                    slack += a[p].second;
                    p++;
                    q++;
                } else if (a[p].first < b[q].first) {
                    p++;
                } else {
                    q++;
                }
            }
            if (slack < 0) {
                present[i * m + j] = 1;
                optimal = false;
            }
        }
    return optimal;
}
#endif

// weights: n x n, symmetric, non-negative integers. Returns mate[i] (or -1 for the odd one out).
// Large problems are solved on each thread's heaviest edges first; the dual solution then proves
// the result optimal for the complete graph, or names the edges to add for another round.
py::array_t<int32_t> max_weight_matching(IntArray weights)
{
    if (weights.ndim() != 2 || weights.shape(0) != weights.shape(1))
        throw std::invalid_argument("weights must be a square matrix");
    const int64_t n = weights.shape(0);
    py::array_t<int32_t> mate_out(n);
    auto out = mate_out.mutable_unchecked<1>();
    for (int64_t i = 0; i < n; i++)
        out(i) = -1;
    if (n < 2)
        return mate_out;
#ifdef PINWISE_HAVE_LEMON
    auto w = weights.unchecked<2>();
    const int64_t m = n + (n % 2);  // an isolated dummy vertex makes the count even
    auto weight = [&](int64_t i, int64_t j) -> int64_t { return (i < n && j < n) ? w(i, j) : 0; };
    std::vector<int32_t> mate(m, -1);
    {
        py::gil_scoped_release release;
        const int64_t keep = 24;
        std::vector<uint8_t> present(m * m, m <= 4 * keep ? 1 : 0);
        if (m > 4 * keep) {
            std::vector<int64_t> order(m);
            for (int64_t i = 0; i < m; i++) {
                for (int64_t j = 0; j < m; j++)
                    order[j] = j;
                std::partial_sort(order.begin(), order.begin() + keep + 1, order.end(),
                                  [&](int64_t a, int64_t b) { return weight(i, a) > weight(i, b); });
                for (int64_t k = 0; k <= keep; k++) {
                    int64_t j = order[k];
                    if (j != i)
                        present[std::min(i, j) * m + std::max(i, j)] = 1;
                }
            }
            for (int64_t i = 0; i + 1 < m; i += 2)  // a perfect matching always exists
                present[i * m + i + 1] = 1;
        }
        while (!solve_on(m, present, weight, mate)) {
        }
    }
    for (int64_t i = 0; i < n; i++)
        out(i) = mate[i] < n ? mate[i] : -1;
    return mate_out;
#else
    throw std::runtime_error("pinwise was built without LEMON (apt-get install liblemon-dev), so exact matching is unavailable here");
#endif
}

// One grouping level on a sparse symmetric graph (CSR). Returns the group of each element.
// `part` (empty, or one label per element) confines every group to one part: only elements of the
// seed's part join it, and a group closes early when its part has no free element left.
py::array_t<int32_t> greedy_groups(IntArray indptr_in, IntArray indices_in, DoubleArray data_in, int64_t n, int64_t size,
                                   IntArray part_in)
{
    if (size < 1)
        throw std::invalid_argument("group size must be at least 1");
    if (indptr_in.size() != n + 1 || indices_in.size() != data_in.size())
        throw std::invalid_argument("malformed CSR arrays");
    if (part_in.size() != 0 && part_in.size() != n)
        throw std::invalid_argument("part needs one label per element");
    const int64_t *indptr = indptr_in.data();
    const int64_t *indices = indices_in.data();
    const double *data = data_in.data();
    const int64_t *part = part_in.size() ? part_in.data() : nullptr;
    for (int64_t i = 0; part && i < n; i++)
        if (part[i] < 0 || part[i] >= n)
            throw std::invalid_argument("part labels must lie in [0, n)");
    py::array_t<int32_t> labels_out(n);
    int32_t *labels = labels_out.mutable_data();
    {
        py::gil_scoped_release release;
        std::vector<double> total(n, 0.0), gain(n, 0.0);
        std::vector<char> assigned(n, 0);
        for (int64_t i = 0; i < n; i++) {
            labels[i] = -1;
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++)
                if (indices[k] != i)
                    total[i] += data[k];
        }
        // Seeds: heaviest first, lowest index on ties (deterministic).
        std::vector<int64_t> by_total(n);
        for (int64_t i = 0; i < n; i++)
            by_total[i] = i;
        std::stable_sort(by_total.begin(), by_total.end(), [&](int64_t a, int64_t b) { return total[a] > total[b]; });
        size_t next_seed = 0;
        // With parts: the elements of each part, heaviest first, and a cursor per part.
        std::vector<int64_t> part_start, part_order, part_next;
        if (part) {
            part_start.assign(n + 1, 0);
            for (int64_t i = 0; i < n; i++)
                part_start[part[i] + 1]++;
            for (int64_t p = 0; p < n; p++)
                part_start[p + 1] += part_start[p];
            part_next.assign(part_start.begin(), part_start.end() - 1);
            part_order.resize(n);
            for (int64_t v : by_total)
                part_order[part_next[part[v]]++] = v;
            part_next.assign(part_start.begin(), part_start.end() - 1);
        }
        using Entry = std::pair<double, int64_t>;  // (gain, -index) so that ties prefer low indices
        int32_t group = 0;
        int64_t remaining = n;
        std::vector<int64_t> touched;
        while (remaining > 0) {
            std::priority_queue<Entry> candidates;
            touched.clear();
            auto take = [&](int64_t v) {
                assigned[v] = 1;
                labels[v] = group;
                remaining--;
                for (int64_t k = indptr[v]; k < indptr[v + 1]; k++) {
                    int64_t u = indices[k];
                    if (assigned[u] || data[k] <= 0 || (part && part[u] != part[v]))
                        continue;
                    if (gain[u] == 0.0)
                        touched.push_back(u);
                    gain[u] += data[k];
                    candidates.push({gain[u], -u});
                }
            };
            while (assigned[by_total[next_seed]])
                next_seed++;
            const int64_t seed = by_total[next_seed];
            take(seed);
            for (int64_t member = 1; member < size && remaining > 0; member++) {
                int64_t pick = -1;
                while (!candidates.empty()) {
                    auto [g, neg] = candidates.top();
                    candidates.pop();
                    int64_t u = -neg;
                    if (!assigned[u] && g == gain[u]) {
                        pick = u;
                        break;
                    }
                }
                if (pick < 0 && part) {  // nobody talks to the group: the heaviest free element of its part
                    int64_t p = part[seed];
                    while (part_next[p] < part_start[p + 1] && assigned[part_order[part_next[p]]])
                        part_next[p]++;
                    if (part_next[p] == part_start[p + 1])
                        break;  // the part is used up: the group closes smaller
                    pick = part_order[part_next[p]];
                } else if (pick < 0) {  // nobody talks to the group: the heaviest free element joins
                    while (assigned[by_total[next_seed]])
                        next_seed++;
                    pick = by_total[next_seed];
                }
                take(pick);
            }
            for (int64_t u : touched)
                gain[u] = 0.0;
            group++;
        }
    }
    return labels_out;
}

// Local search. m: T x T communication; dist: S x S slot distances; slot_of: T slots (distinct).
py::array_t<int32_t> refine_swaps(DoubleArray m_in, Int32Array dist_in, Int32Array slot_in, int max_passes)
{
    const int64_t t = m_in.shape(0), s = dist_in.shape(0);
    if (m_in.ndim() != 2 || m_in.shape(1) != t || dist_in.ndim() != 2 || dist_in.shape(1) != s || slot_in.size() != t)
        throw std::invalid_argument("refine_swaps: shapes do not match");
    const double *m = m_in.data();
    const int32_t *dist = dist_in.data();
    py::array_t<int32_t> result(t);
    int32_t *slot = result.mutable_data();
    std::copy(slot_in.data(), slot_in.data() + t, slot);
    {
        py::gil_scoped_release release;
        std::vector<char> used(s, 0);
        for (int64_t i = 0; i < t; i++)
            used[slot[i]] = 1;
        const double eps = 1e-9;
        for (int pass = 0; pass < max_passes; pass++) {
            bool improved = false;
            for (int64_t a = 0; a < t; a++) {
                for (int64_t b = a + 1; b < t; b++) {
                    const int32_t sa = slot[a], sb = slot[b];
                    double delta = 0.0;
                    for (int64_t k = 0; k < t; k++) {
                        if (k == a || k == b)
                            continue;
                        const int32_t sk = slot[k];
                        delta += (m[a * t + k] - m[b * t + k]) * (dist[sb * s + sk] - dist[sa * s + sk]);
                    }
                    if (delta < -eps) {
                        slot[a] = sb;
                        slot[b] = sa;
                        improved = true;
                    }
                }
                if (s > t) {
                    for (int64_t f = 0; f < s; f++) {
                        if (used[f])
                            continue;
                        const int32_t sa = slot[a];
                        double delta = 0.0;
                        for (int64_t k = 0; k < t; k++)
                            if (k != a)
                                delta += m[a * t + k] * (dist[f * s + slot[k]] - dist[sa * s + slot[k]]);
                        if (delta < -eps) {
                            used[sa] = 0;
                            used[f] = 1;
                            slot[a] = static_cast<int32_t>(f);
                            improved = true;
                        }
                    }
                }
            }
            if (!improved)
                break;
        }
    }
    return result;
}

}  // namespace

PYBIND11_MODULE(_kernels, module)
{
    module.doc() = "pinwise's native mapping kernels";
    module.def("have_exact_matching", &have_exact_matching);
    module.def("max_weight_matching", &max_weight_matching, py::arg("weights"));
    module.def("greedy_groups", &greedy_groups, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("n"),
               py::arg("size"), py::arg("part") = py::array_t<int64_t>(0));
    module.def("refine_swaps", &refine_swaps, py::arg("m"), py::arg("dist"), py::arg("slot_of"), py::arg("max_passes") = 20);
}
