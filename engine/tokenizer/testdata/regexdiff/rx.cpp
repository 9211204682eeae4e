// Differential helper: runs llama.cpp-style regex_split_stl with std::regex / std::wregex.
#include <regex>
#include <string>
#include <vector>
#include <iostream>
#include <sstream>
template<typename CharT>
static std::vector<size_t> split_stl(const std::basic_string<CharT> & text, const std::basic_string<CharT> & regex, const std::vector<size_t> & offsets) {
    std::basic_regex<CharT> expr(regex, std::regex_constants::optimize | std::regex_constants::nosubs);
    std::vector<size_t> out;
    size_t start = 0;
    for (auto offset : offsets) {
        std::regex_iterator<const CharT *> it(text.data() + start, text.data() + start + offset, expr);
        std::regex_iterator<const CharT *> end;
        int64_t start_idx = 0;
        while (it != end) {
            std::match_results<const CharT *> match = *it;
            if (match.position() > start_idx) out.emplace_back(match.position() - start_idx);
            out.emplace_back(match.length());
            start_idx = match.position() + match.length();
            ++it;
        }
        if (start_idx < (int64_t) offset) out.emplace_back(offset - start_idx);
        start += offset;
    }
    return out;
}
static std::vector<long> ints(const std::string & s) { std::vector<long> v; std::istringstream is(s); long x; while (is >> x) v.push_back(x); return v; }
int main() {
    std::string mode, pat, txt, offs;
    while (std::getline(std::cin, mode) && std::getline(std::cin, pat) && std::getline(std::cin, txt) && std::getline(std::cin, offs)) {
        auto p = ints(pat), t = ints(txt), o = ints(offs);
        std::vector<size_t> off(o.begin(), o.end()), res;
        try {
            if (mode == "C") {
                std::string ps, ts;
                for (auto c : p) ps.push_back((char) c);
                for (auto c : t) ts.push_back((char) c);
                res = split_stl<char>(ts, ps, off);
            } else {
                std::wstring ps, ts;
                for (auto c : p) ps.push_back((wchar_t) c);
                for (auto c : t) ts.push_back((wchar_t) c);
                res = split_stl<wchar_t>(ts, ps, off);
            }
        } catch (std::exception & e) { std::cout << "ERR " << e.what() << "\n"; continue; }
        for (size_t i = 0; i < res.size(); i++) { if (res[i] == 0) continue; std::cout << res[i] << (i + 1 < res.size() ? " " : ""); }
        std::cout << "\n" << std::flush;
    }
}
